package raftstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Request evaluation on a replica. Writes are evaluated when applied, so
// every replica computes the same outcome; linearizable reads are served by
// the leaseholder from local state once it has applied everything committed
// when the read arrived, other reads as closed.go explains.

// Value is what a point read finds.
type Value struct {
	Value []byte
	Found bool
	// TTL is the value's remaining time to live by the replica's clock
	// (readNow); 0: it does not expire.
	TTL time.Duration
	// Version is the timestamp of the key's newest version at the read's
	// timestamp, live or not (a delete, an expired value), so that a
	// reader can tell a key rewritten with the same value (Redis's WATCH);
	// zero: none, or the unversioned layout.
	Version hlc.Timestamp
}

// GetValue reads one key with its TTL.
func (r *Replica) GetValue(ctx context.Context, key []byte, ro ReadOptions) (Value, error) {
	if err := r.checkKey(key); err != nil {
		return Value{}, err
	}
	if err := r.checkRead(ctx, ro, pointSpan(key)); err != nil {
		return Value{}, err
	}
	for {
		lv, err := r.readLayout(ctx)
		if err != nil {
			return Value{}, err
		}
		v, err := r.get(r.store.eng, lv.mvcc, key, ro)
		if r.stillLayout(lv) {
			return v, cmp.Or(err, r.checkGCThreshold(ro.Timestamp))
		}
	}
}

// readNow is the wall time at which a read judges expiry: the node's HLC,
// the leaseholder's clock for a lease read. Every replica reading at one
// time agrees, since expiry is part of the replicated value; a follower's
// bounded read uses its own clock, within the offset the cluster allows
// of the leaseholder's.
func (r *Replica) readNow() int64 { return r.store.hlc.Now().WallTime }

// expiryAt is the wall time a read at ts (zero: the newest versions, now)
// judges expiry at: a read at a timestamp sees what was live then.
func (r *Replica) expiryAt(ts hlc.Timestamp) int64 {
	if ts.IsZero() {
		return r.readNow()
	}
	return ts.WallTime
}

// get reads key from rd in a layout at ro.Timestamp (zero: the newest
// version), judging expiry as expiryAt says. An intent of a transaction
// other than ro.Txn fails it (*IntentError).
func (r *Replica) get(rd storage.Reader, versioned bool, key []byte, ro ReadOptions) (Value, error) {
	ts := ro.Timestamp
	buf := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(buf)
	if !versioned {
		*buf = keys.AppendDataKey((*buf)[:0], r.rangeID, key)
		v, found, err := rd.Get(*buf)
		return Value{Value: v, Found: found}, err
	}
	*buf = keys.AppendVersionedKey((*buf)[:0], key)
	now := r.expiryAt(ts)
	ver, err := r.readVersion(rd, *buf, ts, ro.Txn)
	if err == nil && ver.Txn != nil {
		err = r.foreignIntent(key, ver, ro.Txn)
	}
	if err == nil {
		err = r.checkUncertainPoint(rd, *buf, key, ro)
	}
	if err != nil {
		return Value{}, err
	}
	if !ver.LiveAt(now) {
		return Value{Version: ver.Timestamp}, nil
	}
	v := Value{Value: ver.Value, Found: true, Version: ver.Timestamp}
	if ver.ExpiresAt != 0 {
		v.TTL = time.Duration(ver.ExpiresAt - now)
	}
	return v, nil
}

// TTLMillis is a TTL in an API answer: whole milliseconds, rounded up so
// that a value about to expire does not read as one that never does.
func TTLMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// CeilMillis is an expiry in HLC wall nanoseconds as API milliseconds,
// rounded up, so that a value written back with it expires no earlier
// than it did (0 stays 0: no expiry).
func CeilMillis(ns int64) int64 {
	return (ns + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}

// readAt is the mvcc read timestamp of a read at ts (zero: the newest).
func readAt(ts hlc.Timestamp) hlc.Timestamp {
	if ts.IsZero() {
		return hlc.MaxTimestamp
	}
	return ts
}

// keyBufs holds engine-key buffers for point reads: a read's only
// allocation is then its value (the engine copies it out).
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

// BatchGet reads several keys of this range at one point.
func (r *Replica) BatchGet(ctx context.Context, ks [][]byte, ro ReadOptions) ([]*tidekvpb.GetResponse, error) {
	if err := r.checkKey(ks...); err != nil {
		return nil, err
	}
	spans := make([]keySpan, len(ks))
	for i, k := range ks {
		spans[i] = pointSpan(k)
	}
	if err := r.checkRead(ctx, ro, spans...); err != nil {
		return nil, err
	}
	for {
		lv, err := r.readLayout(ctx)
		if err != nil {
			return nil, err
		}
		out, err := r.batchGet(lv.mvcc, ks, ro)
		if r.stillLayout(lv) {
			return out, cmp.Or(err, r.checkGCThreshold(ro.Timestamp))
		}
	}
}

func (r *Replica) batchGet(versioned bool, ks [][]byte, ro ReadOptions) ([]*tidekvpb.GetResponse, error) {
	snap := r.store.eng.NewSnapshot()
	defer snap.Close()
	out := make([]*tidekvpb.GetResponse, len(ks))
	for i, k := range ks {
		v, err := r.get(snap, versioned, k, ro)
		if err != nil {
			return nil, err
		}
		out[i] = &tidekvpb.GetResponse{Found: v.Found, Value: v.Value, TtlMs: TTLMillis(v.TTL), VersionTimestamp: tidekvpb.OptionalHLC(v.Version)}
	}
	return out, nil
}

// Scan reads keys in [start, end) clipped to this range, at most limit keys
// and about maxBytes bytes. resume is where the caller continues (empty when
// the scan is complete).
func (r *Replica) Scan(ctx context.Context, start, end []byte, limit int, maxBytes int, ro ReadOptions) (kvs []*tidekvpb.KeyValue, resume []byte, err error) {
	if limit <= 0 || maxBytes <= 0 {
		return nil, nil, fmt.Errorf("%w: scan limit and byte budget must be positive", ErrInvalidRequest)
	}
	if err := r.checkKey(start); err != nil {
		return nil, nil, err
	}
	d := r.desc.Load()
	upper := end
	clipped := false
	if len(d.GetEndKey()) > 0 && (len(end) == 0 || bytes.Compare(d.GetEndKey(), end) < 0) {
		upper, clipped = d.GetEndKey(), true
	}
	if err := r.checkRead(ctx, ro, keySpan{start: start, end: upper}); err != nil {
		return nil, nil, err
	}
	for {
		// Not :=, which would hide the scan's error from the return.
		lv, lerr := r.readLayout(ctx)
		if lerr != nil {
			return nil, nil, lerr
		}
		scan := r.scanUnversioned
		if lv.mvcc {
			scan = r.scanVersioned
		}
		kvs, resume, err = scan(start, upper, limit, maxBytes, ro)
		if r.stillLayout(lv) {
			err = cmp.Or(err, r.checkGCThreshold(ro.Timestamp))
			break
		}
	}
	if err == nil && resume == nil && clipped {
		resume = append([]byte(nil), upper...)
	}
	return kvs, resume, err
}

// scanUnversioned scans [start, upper) (empty upper: the range's end);
// resume is nil when it read to the end.
func (r *Replica) scanUnversioned(start, upper []byte, limit, maxBytes int, _ ReadOptions) (kvs []*tidekvpb.KeyValue, resume []byte, err error) {
	lo, hi := keys.DataSpan(r.rangeID, start, upper)
	it, err := r.store.eng.NewIter(lo, hi)
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	size := 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(kvs) >= limit || size >= maxBytes {
			last := kvs[len(kvs)-1].Key
			return kvs, append(append([]byte(nil), last...), 0), nil
		}
		k := append([]byte(nil), keys.UserKey(it.Key())...)
		v := append([]byte(nil), it.Value()...)
		size += len(k) + len(v)
		kvs = append(kvs, &tidekvpb.KeyValue{Key: k, Value: v})
	}
	return kvs, nil, nil
}

// scanVersioned is scanUnversioned on the versioned layout, reading at
// ro.Timestamp (ts) what had not expired then, or (zero ts) the newest
// versions that have not expired now (readNow), and checking the keys it
// read through for versions in ro's uncertainty window.
func (r *Replica) scanVersioned(start, upper []byte, limit, maxBytes int, ro ReadOptions) ([]*tidekvpb.KeyValue, []byte, error) {
	ts := ro.Timestamp
	lo, hi := keys.VersionedSpan(start, upper)
	scan := func() ([]mvcc.KeyValue, []byte, error) {
		return mvcc.Scan(r.store.eng, lo, hi, ts, limit, maxBytes)
	}
	if ts.IsZero() {
		scan = func() ([]mvcc.KeyValue, []byte, error) {
			return mvcc.ScanNewest(r.store.eng, lo, hi, r.readNow(), limit, maxBytes)
		}
	}
	found, resume, err := scan()
	var ie *mvcc.IntentError
	if errors.As(err, &ie) {
		err = r.foreignIntent(keys.UserKey(ie.Key), mvcc.Version{Timestamp: ie.Timestamp, Txn: ie.Txn}, nil)
	}
	if err == nil {
		readTo := hi
		if resume != nil {
			readTo = resume
		}
		err = r.checkUncertainSpan(lo, readTo, ro)
	}
	if err != nil {
		return nil, nil, err
	}
	kvs := make([]*tidekvpb.KeyValue, len(found))
	for i, kv := range found {
		kvs[i] = &tidekvpb.KeyValue{Key: keys.UserKey(kv.Key), Value: kv.Value, ExpireAtMs: CeilMillis(kv.ExpiresAt)}
	}
	if resume != nil {
		resume = keys.UserKey(resume)
	}
	return kvs, resume, nil
}

func (r *Replica) checkKey(ks ...[]byte) error {
	d := r.desc.Load()
	if d == nil {
		return &RangeNotFoundError{RangeID: r.rangeID}
	}
	for _, k := range ks {
		if !keys.Contains(d.GetStartKey(), d.GetEndKey(), k) {
			return &KeyMismatchError{Key: k, Desc: d}
		}
	}
	return nil
}

// Write applies ops atomically; deleted reports whether any deleted key existed.
func (r *Replica) Write(ctx context.Context, ops []*tidekvpb.WriteOp) (deleted bool, err error) {
	ks := make([][]byte, len(ops))
	for i, op := range ops {
		ks[i] = op.GetKey()
	}
	if err := r.checkKey(ks...); err != nil {
		return false, err
	}
	res, err := r.proposeWrite(ctx, writeSpans(ops, nil), func(ts *tidekvpb.LogTimestamp) (*tidekvpb.RaftCommand, error) {
		return r.writeCommand(ops, nil, ts)
	})
	return res.deleted, err
}

// writeCommand is the Raft command of a write of ops, guarded by g (nil:
// none), at ts.
func (r *Replica) writeCommand(ops []*tidekvpb.WriteOp, g *tidekvpb.WriteGuard, ts *tidekvpb.LogTimestamp) (*tidekvpb.RaftCommand, error) {
	ws, err := logWrites(ops, commandTimestamp(ts))
	if err != nil {
		return nil, err
	}
	cmd := &tidekvpb.RaftCommand{Writes: ws, WriteGuard: logGuard(g), Timestamp: ts}
	return cmd, r.checkExpiry(cmd)
}

// writeSpans are the keys a write of ops under g reads or writes.
func writeSpans(ops []*tidekvpb.WriteOp, g *tidekvpb.WriteGuard) []keySpan {
	spans := make([]keySpan, 0, len(ops)+2)
	for _, op := range ops {
		spans = append(spans, pointSpan(op.GetKey()))
	}
	if g != nil {
		spans = append(spans, pointSpan(g.GetKey()))
		if len(g.GetClearEnd()) > 0 {
			spans = append(spans, keySpan{start: g.GetClearStart(), end: g.GetClearEnd()})
		}
	}
	return spans
}

// proposeWrite builds the command of a write of spans at the timestamp the
// leaseholder chooses now (readorder.go), proposes it holding the write's
// latch, and answers once the clock has passed the timestamp.
func (r *Replica) proposeWrite(ctx context.Context, spans []keySpan, build func(*tidekvpb.LogTimestamp) (*tidekvpb.RaftCommand, error)) (applyResult, error) {
	ts, l := r.stampWrite(spans)
	cmd, err := build(ts)
	if err != nil {
		if l != nil {
			r.order.release(l, false)
		}
		return applyResult{}, err
	}
	res, err := r.proposeLatched(ctx, cmd, nil, l)
	if err == nil && ts != nil {
		r.commitWait(ctx, ts)
	}
	return res, err
}

// checkExpiry refuses a command that uses expiry before every node's
// binary applies it.
func (r *Replica) checkExpiry(cmd *tidekvpb.RaftCommand) error {
	if usesExpiry(cmd) && r.store.logVersion.Load() < LogVersionExpiry {
		return expiryVersionErr()
	}
	return nil
}

// WriteGuarded applies ops under guard (nil: none) in one Raft command and
// returns what the write found: whether the guard held, and with
// wantExisted which op keys existed (see tidekvpb.WriteRequest).
func (r *Replica) WriteGuarded(ctx context.Context, ops []*tidekvpb.WriteOp, guard *tidekvpb.WriteGuard, wantExisted bool) (*tidekvpb.WriteResponse, error) {
	ks := make([][]byte, 0, len(ops)+1)
	for _, op := range ops {
		ks = append(ks, op.GetKey())
	}
	if guard != nil {
		ks = append(ks, guard.GetKey())
	}
	if err := r.checkKey(ks...); err != nil {
		return nil, err
	}
	if guard != nil {
		if err := r.store.needVersion(LogVersionShared, "a guarded write (Redis hash commands)"); err != nil {
			return nil, err
		}
	}
	res, err := r.proposeWrite(ctx, writeSpans(ops, guard), func(ts *tidekvpb.LogTimestamp) (*tidekvpb.RaftCommand, error) {
		cmd, err := r.writeCommand(ops, guard, ts)
		if err == nil {
			cmd.WantExisted = wantExisted
		}
		return cmd, err
	})
	return res.write, err
}

// CompareAndSet applies a conditional write, or an increment: one command
// whatever other writes of the key are in flight, its sum computed as it
// applies.
func (r *Replica) CompareAndSet(ctx context.Context, req *tidekvpb.CompareAndSetRequest) (*tidekvpb.CompareAndSetResponse, error) {
	if err := r.checkKey(req.GetKey()); err != nil {
		return nil, err
	}
	if req.GetIncrement() {
		if err := r.store.needVersion(LogVersionIncrement, "an increment (Redis INCR)"); err != nil {
			return nil, err
		}
	}
	res, err := r.proposeWrite(ctx, []keySpan{pointSpan(req.GetKey())}, func(ts *tidekvpb.LogTimestamp) (*tidekvpb.RaftCommand, error) {
		c, err := logCAS(req, commandTimestamp(ts))
		if err != nil {
			return nil, err
		}
		cmd := &tidekvpb.RaftCommand{Cas: c, Timestamp: ts}
		return cmd, r.checkExpiry(cmd)
	})
	return res.cas, err
}

// ProposeMeta runs a command on the meta range; it returns the allocated ID
// for commands that allocate one.
func (r *Replica) ProposeMeta(ctx context.Context, mc *tidekvpb.MetaCommand) (uint64, error) {
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Meta: mc}, nil)
	return res.metaID, err
}

// LeaseRead waits until local state may be read linearizably.
func (r *Replica) LeaseRead(ctx context.Context) error { return r.waitLeaseRead(ctx) }
