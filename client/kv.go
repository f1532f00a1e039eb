package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// KeyValue is one key and its value.
type KeyValue struct {
	Key, Value []byte
	// ExpireAt is when the value expires, to the millisecond (rounded up)
	// by the cluster's clocks; zero: it does not expire.
	ExpireAt time.Time
}

// expireAt is an API expiry in Unix milliseconds as a time (0: none).
func expireAt(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Op is one operation of an atomic Write: a put of Value, or a delete, or
// (SetTTL) a change of the key's TTL.
type Op struct {
	Key, Value []byte
	Delete     bool
	// SetTTL: not a put; if the key exists, its expiry becomes Expiry's
	// (none: removed) and its value stays (Redis EXPIRE, PERSIST).
	SetTTL bool
	// Expiry is a put's TTL (expiry.go).
	Expiry Expiry
}

// GetResult is the outcome for one key of a BatchGet or a GetVersion.
type GetResult struct {
	Value []byte
	Found bool
	// TTL is the value's remaining time to live (0: it does not expire).
	TTL time.Duration
	// Version is the timestamp of the key's newest version at the read's
	// timestamp, live or not (a delete, an expired value): a key written
	// again, even with the same value, has a new one. Zero: the key has no
	// version, its range is unversioned, or the node is older.
	Version hlc.Timestamp
	// Expiry is set by a transaction's reads (Tx.GetVersion), whose TTL
	// would count from the read timestamp: the value's expiry as a write
	// states it, so that a write can keep it (Redis's KEEPTTL): At for a
	// stored value, the transaction's own put's TTL (from the commit) or
	// At; none: it does not expire.
	Expiry Expiry
}

func getResult(r *tidekvpb.GetResponse) GetResult {
	return GetResult{Value: r.GetValue(), Found: r.GetFound(), TTL: time.Duration(r.GetTtlMs()) * time.Millisecond,
		Version: r.GetVersionTimestamp().HLC()}
}

// Get returns the value of key, or an error wrapping ErrNotFound. opts
// choose the read mode (Linearizable, Bounded, Any; default
// Config.DefaultRead).
func (c *Client) Get(ctx context.Context, key []byte, opts ...ReadOption) ([]byte, error) {
	resp, err := c.get(ctx, key, opts)
	return resp.GetValue(), err
}

// GetVersion reads key as Get does, with its version (GetResult.Version);
// an absent key is Found false, not an error.
func (c *Client) GetVersion(ctx context.Context, key []byte, opts ...ReadOption) (GetResult, error) {
	resp, err := c.read(ctx, key, opts)
	if err != nil {
		return GetResult{}, err
	}
	return getResult(resp), nil
}

// get reads key; a key not found is an error wrapping ErrNotFound.
func (c *Client) get(ctx context.Context, key []byte, opts []ReadOption) (*tidekvpb.GetResponse, error) {
	resp, err := c.read(ctx, key, opts)
	if err == nil && !resp.GetFound() {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return resp, err
}

// read reads key, found or not.
func (c *Client) read(ctx context.Context, key []byte, opts []ReadOption) (*tidekvpb.GetResponse, error) {
	ro, err := c.readOption("get", opts)
	if err != nil {
		return nil, err
	}
	req := &tidekvpb.GetRequest{Key: key, ReadMode: ro.mode, MaxStalenessMs: ro.staleMs(), ReadTimestamp: ro.timestamp(), Keyspace: keyspace.NameFrom(ctx), TxnId: []byte(ro.txn),
		UncertaintyLimit: wireTS(ro.limit)}
	var resp *tidekvpb.GetResponse
	r := &rpc{op: "get", key: key, idempotent: true, read: ro}
	r.call = func(ctx context.Context, nc *nodeConn) (err error) {
		resp, err = nc.kv.Get(ctx, req)
		r.served = resp.GetRangeGeneration()
		return err
	}
	if err := c.invoke(ctx, r); err != nil {
		return nil, err
	}
	if err := ro.served("get", resp.GetReadTimestamp()); err != nil {
		return nil, err
	}
	return resp, nil
}

// Put sets key to value. It is retried while the cluster says it was not
// applied (redirects, overload, connection refused); once an attempt's
// outcome is unknown it returns ErrAmbiguous rather than retry, because a
// late-applied first attempt plus a retry would write the value twice,
// around other clients' writes. A TTL the key had is cleared.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	return c.PutTTL(ctx, key, value, 0)
}

// PutTTL is Put of a value that expires ttl after the write (0: never).
func (c *Client) PutTTL(ctx context.Context, key, value []byte, ttl time.Duration) error {
	ms, _, err := Expiry{TTL: ttl}.wire()
	if err != nil {
		return err
	}
	req := &tidekvpb.PutRequest{Key: key, Value: value, TtlMs: ms, Keyspace: keyspace.NameFrom(ctx)}
	return c.invoke(ctx, &rpc{op: "put", key: key,
		call: func(ctx context.Context, nc *nodeConn) error {
			_, err := nc.kv.Put(ctx, req)
			return err
		}})
}

// Delete removes key and reports whether it existed. Like Put, an unknown
// outcome is returned as ErrAmbiguous, not retried.
func (c *Client) Delete(ctx context.Context, key []byte) (existed bool, err error) {
	req := &tidekvpb.DeleteRequest{Key: key, Keyspace: keyspace.NameFrom(ctx)}
	err = c.invoke(ctx, &rpc{op: "delete", key: key,
		call: func(ctx context.Context, nc *nodeConn) error {
			resp, err := nc.kv.Delete(ctx, req)
			existed = resp.GetDeleted()
			return err
		}})
	return existed, err
}

// Scan returns the pairs with keys in [start, end) in key order, at most limit
// of them. An empty end means no upper bound. limit <= 0 means no limit of
// the client's own: every request then asks for the server's maximum page,
// and the scan runs to end. Each request reads one range; Scan continues at
// the server's resume key until the limit or end is reached. The result is
// not a snapshot across ranges unless opts read at one timestamp (ReadAt,
// SnapshotScan). opts choose the read mode, for every range (with Bounded or
// Any each range's page may come from a different replica).
func (c *Client) Scan(ctx context.Context, start, end []byte, limit int, opts ...ReadOption) ([]KeyValue, error) {
	ro, err := c.readOption("scan", opts)
	if err != nil {
		return nil, err
	}
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil, nil
	}
	var out []KeyValue
	for {
		req := &tidekvpb.ScanRequest{StartKey: start, EndKey: end, ReadMode: ro.mode, MaxStalenessMs: ro.staleMs(), ReadTimestamp: ro.timestamp(),
			Keyspace: keyspace.NameFrom(ctx), HashOrder: ctx.Value(hashOrderKey{}) != nil, UncertaintyLimit: wireTS(ro.limit)}
		if limit > 0 {
			req.Limit = uint32(min(limit-len(out), math.MaxUint32))
		}
		var resp *tidekvpb.ScanResponse
		r := &rpc{op: "scan", key: start, idempotent: true, read: ro}
		r.call = func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.kv.Scan(ctx, req)
			r.served = resp.GetRangeGeneration()
			return err
		}
		if err := c.invoke(ctx, r); err != nil {
			return out, err
		}
		if err := ro.served("scan", resp.GetReadTimestamp()); err != nil {
			return out, err
		}
		for _, kv := range resp.GetKvs() {
			out = append(out, KeyValue{Key: kv.GetKey(), Value: kv.GetValue(), ExpireAt: expireAt(kv.GetExpireAtMs())})
		}
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		next := resp.GetResumeKey()
		if len(next) == 0 || (len(end) > 0 && bytes.Compare(next, end) >= 0) {
			return out, nil
		}
		if bytes.Compare(next, start) <= 0 {
			// A resume key that does not advance would loop forever.
			return out, fmt.Errorf("tidekv: scan: server returned resume key %q not after start %q", next, start)
		}
		start = next
	}
}

// maxRegroups bounds how often BatchGet re-splits keys whose range split
// under it; each regroup follows fresh routing information, so a few suffice.
const maxRegroups = 8

// BatchGet reads keys, sending one request per range (in parallel). Results
// are in the order of keys. opts choose the read mode, for every range.
func (c *Client) BatchGet(ctx context.Context, keys [][]byte, opts ...ReadOption) ([]GetResult, error) {
	ro, err := c.readOption("batch get", opts)
	if err != nil {
		return nil, err
	}
	out := make([]GetResult, len(keys))
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	if err := c.batchGet(ctx, keys, idx, out, ro, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// batchGet reads keys[idx] into out[idx], grouped by cached range.
func (c *Client) batchGet(ctx context.Context, keys [][]byte, idx []int, out []GetResult, ro ReadOption, depth int) error {
	if len(idx) == 0 {
		return nil
	}
	groups := c.groupByRange(ctx, keys, idx)
	if len(groups) == 1 {
		return c.batchGetGroup(ctx, keys, groups[0], out, ro, depth)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.batchGetGroup(ctx, keys, g, out, ro, depth); err != nil {
				once.Do(func() { firstErr = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// groupByRange splits idx by the cached range of each key, filling the cache
// first if it is empty. Keys the cache cannot place form one group that the
// server will sort out.
func (c *Client) groupByRange(ctx context.Context, keys [][]byte, idx []int) [][]int {
	s := c.cache.load()
	if len(s.ranges) == 0 {
		_ = c.refresh(ctx, s.epoch)
		s = c.cache.load()
	}
	var (
		groups [][]int
		pos    = map[*rangeEntry]int{}
	)
	for _, i := range idx {
		e := s.lookup(keys[i])
		g, ok := pos[e]
		if !ok {
			g = len(groups)
			pos[e] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

func (c *Client) batchGetGroup(ctx context.Context, keys [][]byte, idx []int, out []GetResult, ro ReadOption, depth int) error {
	req := &tidekvpb.BatchGetRequest{Keys: make([][]byte, len(idx)), ReadMode: ro.mode, MaxStalenessMs: ro.staleMs(), ReadTimestamp: ro.timestamp(), Keyspace: keyspace.NameFrom(ctx)}
	for j, i := range idx {
		req.Keys[j] = keys[i]
	}
	var resp *tidekvpb.BatchGetResponse
	r := &rpc{op: "batch get", key: req.Keys[0], span: req.Keys, idempotent: true, read: ro}
	r.call = func(ctx context.Context, nc *nodeConn) (err error) {
		resp, err = nc.kv.BatchGet(ctx, req)
		r.served = resp.GetRangeGeneration()
		return err
	}
	err := c.invoke(ctx, r)
	if errors.Is(err, errSpanChanged) {
		if depth >= maxRegroups {
			return fmt.Errorf("%w: batch get: range boundaries kept changing", ErrUnavailable)
		}
		return c.batchGet(ctx, keys, idx, out, ro, depth+1)
	}
	if err != nil {
		return err
	}
	if err := ro.served("batch get", resp.GetReadTimestamp()); err != nil {
		return err
	}
	if n := len(resp.GetResults()); n != len(idx) {
		return fmt.Errorf("tidekv: batch get: server returned %d results for %d keys", n, len(idx))
	}
	for j, i := range idx {
		r := resp.GetResults()[j]
		out[i] = getResult(r)
	}
	return nil
}

// Write applies ops atomically. All keys must lie in one range; otherwise it
// returns an error wrapping ErrInvalidArgument.
func (c *Client) Write(ctx context.Context, ops []Op) error {
	if len(ops) == 0 {
		return nil
	}
	req, err := writeRequest(ctx, ops)
	if err != nil {
		return err
	}
	_, err = c.write(ctx, req)
	return err
}

// OpResult is the outcome of one op of a WriteEach.
type OpResult struct {
	// Existed: the key of a delete or a SetTTL op held a value before it.
	Existed bool
	Err     error
}

// WriteEach applies ops in order per key but not as one unit: the ops of
// one range go to its leaseholder as one Write (one proposal), the ranges
// in parallel, so that a pipeline of independent writes costs one round
// trip per range rather than one per op. Results are in the order of ops;
// a Write that fails fails the ops of its range (each op should be valid
// on its own: the node refuses a Write with an invalid op whole).
func (c *Client) WriteEach(ctx context.Context, ops []Op) []OpResult {
	out := make([]OpResult, len(ops))
	keys := make([][]byte, len(ops))
	idx := make([]int, len(ops))
	for i, op := range ops {
		keys[i], idx[i] = op.Key, i
	}
	c.writeEach(ctx, ops, keys, idx, out, 0)
	return out
}

func (c *Client) writeEach(ctx context.Context, ops []Op, keys [][]byte, idx []int, out []OpResult, depth int) {
	if len(idx) == 0 {
		return
	}
	groups := c.groupByRange(ctx, keys, idx)
	if len(groups) == 1 {
		c.writeEachGroup(ctx, ops, keys, groups[0], out, depth)
		return
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.writeEachGroup(ctx, ops, keys, g, out, depth)
		}()
	}
	wg.Wait()
}

// writeEachGroup writes ops[idx], which the cache places in one range, as
// one Write; if the range's boundaries moved it groups them again.
func (c *Client) writeEachGroup(ctx context.Context, ops []Op, keys [][]byte, idx []int, out []OpResult, depth int) {
	sub := make([]Op, len(idx))
	span := make([][]byte, len(idx))
	for j, i := range idx {
		sub[j], span[j] = ops[i], keys[i]
	}
	req, err := writeRequest(ctx, sub)
	var resp *tidekvpb.WriteResponse
	if err == nil {
		req.WantExisted = slices.ContainsFunc(sub, func(op Op) bool { return op.Delete || op.SetTTL })
		err = c.invoke(ctx, &rpc{op: "write", key: span[0], span: span,
			call: func(ctx context.Context, nc *nodeConn) (err error) {
				resp, err = nc.kv.Write(ctx, req)
				return err
			}})
	}
	if errors.Is(err, errSpanChanged) && depth < maxRegroups {
		c.writeEach(ctx, ops, keys, idx, out, depth+1)
		return
	}
	if errors.Is(err, errSpanChanged) {
		err = fmt.Errorf("%w: write: range boundaries kept changing", ErrUnavailable)
	}
	existed := resp.GetExisted()
	for j, i := range idx {
		out[i].Err = err
		if err == nil && j < len(existed) {
			out[i].Existed = existed[j]
		}
	}
}

// Guard makes a write conditional: it applies only if Key is absent or
// holds Value, and if Key is absent it first deletes every key in
// [ClearStart, ClearEnd) (none when both are empty). Key and the span must
// lie in the write's range.
type Guard struct {
	Key, Value           []byte
	ClearStart, ClearEnd []byte
}

// WriteResult is what a guarded write found.
type WriteResult struct {
	// GuardFailed: Key held another value, and nothing was written.
	GuardFailed bool
	// GuardExisted and GuardCurrent: Key's state before the write.
	GuardExisted bool
	GuardCurrent []byte
	// Existed says, per op, whether its key held a value before the write
	// (empty if the guard failed).
	Existed []bool
}

// WriteGuarded applies ops atomically under g, in one round trip, and
// reports what it found. Like Write, all keys must lie in one range.
func (c *Client) WriteGuarded(ctx context.Context, ops []Op, g Guard) (WriteResult, error) {
	req, err := writeRequest(ctx, ops)
	if err != nil {
		return WriteResult{}, err
	}
	req.WantExisted = true
	req.Guard = &tidekvpb.WriteGuard{Key: g.Key, Value: g.Value, ClearStart: g.ClearStart, ClearEnd: g.ClearEnd}
	resp, err := c.write(ctx, req)
	if err != nil {
		return WriteResult{}, err
	}
	return WriteResult{GuardFailed: resp.GetGuardFailed(), GuardExisted: resp.GetGuardExisted(),
		GuardCurrent: resp.GetGuardCurrent(), Existed: resp.GetExisted()}, nil
}

func writeRequest(ctx context.Context, ops []Op) (*tidekvpb.WriteRequest, error) {
	req := &tidekvpb.WriteRequest{Ops: make([]*tidekvpb.WriteOp, len(ops)), Keyspace: keyspace.NameFrom(ctx)}
	for i, op := range ops {
		w := &tidekvpb.WriteOp{Key: op.Key, Value: op.Value, KeepTtl: op.Expiry.Keep}
		var err error
		if w.TtlMs, w.ExpireAtMs, err = op.Expiry.wire(); err != nil {
			return nil, err
		}
		switch {
		case op.Delete:
			w.Kind, w.Value = tidekvpb.WriteOp_DELETE, nil
		case op.SetTTL:
			w.Kind, w.Value = tidekvpb.WriteOp_EXPIRE, nil
		}
		req.Ops[i] = w
	}
	return req, nil
}

// write sends req to the leaseholder of its keys' range.
func (c *Client) write(ctx context.Context, req *tidekvpb.WriteRequest) (*tidekvpb.WriteResponse, error) {
	keys := make([][]byte, 0, len(req.Ops)+1)
	for _, op := range req.Ops {
		keys = append(keys, op.Key)
	}
	if g := req.GetGuard(); g != nil {
		keys = append(keys, g.GetKey())
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: write: no ops", ErrInvalidArgument)
	}
	var resp *tidekvpb.WriteResponse
	r := &rpc{op: "write", key: keys[0], span: keys,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.kv.Write(ctx, req)
			return err
		}}
	for refreshed := false; ; refreshed = true {
		err := c.invoke(ctx, r)
		if !errors.Is(err, errSpanChanged) {
			return resp, err
		}
		if refreshed {
			return nil, fmt.Errorf("%w: write: keys %q and others span more than one range", ErrInvalidArgument, keys[0])
		}
		// The cache may be older than the cluster's ranges; judge by a
		// fresh copy before rejecting the request.
		if err := c.refresh(ctx, c.cache.load().epoch); err != nil && ctx.Err() != nil {
			return nil, ctxError("write", ctx.Err(), err)
		}
	}
}

// CompareAndSet sets key to *newValue, or deletes it when newValue is nil, if
// the key's current state matches: absent when expected is nil, else equal to
// *expected. It returns whether it swapped and the state before the
// operation. It is never retried once it may have reached a server: an
// unknown outcome returns an error wrapping ErrAmbiguous.
func (c *Client) CompareAndSet(ctx context.Context, key []byte, expected *[]byte, newValue *[]byte) (swapped bool, current []byte, currentExists bool, err error) {
	return c.CompareAndSetTTL(ctx, key, expected, newValue, Expiry{})
}

// CompareAndSetTTL is CompareAndSet whose new value has the expiry e. A key
// whose value has expired is absent.
func (c *Client) CompareAndSetTTL(ctx context.Context, key []byte, expected *[]byte, newValue *[]byte, e Expiry) (swapped bool, current []byte, currentExists bool, err error) {
	req := &tidekvpb.CompareAndSetRequest{Key: key}
	if expected != nil {
		req.ExpectExists = true
		req.ExpectedValue = *expected
	}
	if newValue != nil {
		req.NewValue = *newValue
	} else {
		req.Delete = true
	}
	return c.compareAndSet(ctx, "compare and set", req, e)
}

// Increment adds by to key's value, a decimal int64 in canonical form
// (absent: 0), and writes the sum with the expiry e (e.Keep: the value's
// own TTL), in one command the range applies whatever other writes of the
// key are in flight: concurrent increments of one key neither conflict
// nor retry. ok is false, and nothing is written, when the value is not
// such an integer or the sum overflows; before is the value before the
// command either way. Like CompareAndSet it is never retried once it may
// have reached a server. It needs the cluster at Raft log version 12
// (api/tidekv.proto, CompareAndSetRequest.increment): a node's binary
// older than that would take the request for a compare-and-set and write
// an empty value. So the client asks the cluster's log version first (once
// it is high enough, never again: versions only rise) and, below 12,
// refuses with an error wrapping errors.ErrUnsupported, sending nothing.
func (c *Client) Increment(ctx context.Context, key []byte, by int64, e Expiry) (ok bool, before []byte, beforeExists bool, err error) {
	if !c.increments.Load() {
		st, err := c.Status(ctx)
		if err != nil {
			return false, nil, false, err
		}
		if v := st.GetLogVersion(); v < incrementLogVersion {
			return false, nil, false, fmt.Errorf("%w: increments need the cluster at Raft log version %d, it is at %d (docs/upgrades.md)", errors.ErrUnsupported, incrementLogVersion, v)
		}
		c.increments.Store(true)
	}
	return c.compareAndSet(ctx, "increment", &tidekvpb.CompareAndSetRequest{Key: key, Increment: true, IncrementBy: by}, e)
}

// incrementLogVersion is the Raft log version whose binaries apply
// increments (raftstore.LogVersionIncrement).
const incrementLogVersion = 12

// compareAndSet sends req, a CompareAndSet or an increment, with the
// expiry e.
func (c *Client) compareAndSet(ctx context.Context, op string, req *tidekvpb.CompareAndSetRequest, e Expiry) (bool, []byte, bool, error) {
	ms, atMs, err := e.wire()
	if err != nil {
		return false, nil, false, err
	}
	key := req.GetKey()
	req.TtlMs, req.ExpireAtMs, req.KeepTtl, req.Keyspace = ms, atMs, e.Keep, keyspace.NameFrom(ctx)
	var resp *tidekvpb.CompareAndSetResponse
	err = c.invoke(ctx, &rpc{op: op, key: key,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.kv.CompareAndSet(ctx, req)
			return err
		}})
	if err != nil {
		return false, nil, false, err
	}
	return resp.GetSucceeded(), resp.GetCurrentValue(), resp.GetCurrentExists(), nil
}

// Now is a timestamp of the client's hybrid logical clock, after every one
// it handed out or learnt from a node (Batch stream messages carry the
// nodes' clocks): a read at it (ReadAt) sees every write acknowledged to
// this client, within the clocks' offset.
func (c *Client) Now() hlc.Timestamp { return c.clock.Now() }

// SnapshotScan is Scan at one timestamp for every range, Now() taken once:
// a consistent cut across ranges. It returns the timestamp it read at.
func (c *Client) SnapshotScan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, hlc.Timestamp, error) {
	ts := c.Now()
	kvs, err := c.Scan(ctx, start, end, limit, ReadAt(ts))
	return kvs, ts, err
}
