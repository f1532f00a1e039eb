package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/kvapi"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/redisgw"
	"github.com/tidekv/tidekv/internal/resp"
)

// startRedis serves the Redis protocol. Commands on ranges this node leads
// run in process through the KV service (its limits, admission control and
// metrics, without gRPC); the others go through a routing client of this
// node, as gRPC clients' requests do.
func (s *Server) startRedis() error {
	ccfg := client.DefaultConfig()
	ccfg.Addrs = []string{s.Addr()}
	// Writes through this node come from its locality.
	ccfg.Locality = s.cfg.Locality
	// It reaches other nodes as this node, by its node certificate.
	ccfg.TLS = s.peerTLS()
	// A node's "overloaded, retry" goes back to the Redis client at once,
	// with its hint, rather than waiting here while the client waits.
	ccfg.FailFastOnOverload = true
	gw, err := client.New(ccfg)
	if err != nil {
		return err
	}
	kv := newRedisKV(s, redisgw.FromClient(gw))
	// Database 0 is the default key space: its scans stop short of the
	// other key spaces' keys (keyspaces.go).
	def, _ := ksconfig.Catalogue(nil).ByID(keyspace.Default)
	rs, err := resp.New(s.cfg.Redis, redisgw.InKeySpace(kv, def))
	if err != nil {
		gw.Close()
		return fmt.Errorf("redis listener: %w", err)
	}
	rs.SetObserver(s.metrics.observeRedis)
	rs.SetDatabases(redisgw.Databases(kv, s.keySpaceByID))
	s.metrics.reg.MustRegister(kv.collectors()...)
	s.metrics.reg.MustRegister(disconnectCounters(rs)...)
	s.gateway, s.redis = gw, rs
	go rs.Serve()
	return nil
}

// redisKV is the Redis front end's KV: in process when this node holds the
// lease of a key's range, through the routing client otherwise. A local
// attempt that the store refuses without applying anything (the lease moved,
// the range split, or the node is not serving yet) is handed to the routing
// client, which redirects, backs off and retries as it does for every
// client. A local "overloaded, retry" is the Redis client's answer: this
// node's admission refused it.
type redisKV struct {
	s      *Server
	remote resp.KV
	// origin is the node's locality as the routing client would send it, so
	// that in-process writes count for the same origin (leases.go).
	origin metadata.MD
	// Calls served in process and through the routing client.
	local, routed atomic.Uint64
}

func newRedisKV(s *Server, remote resp.KV) *redisKV {
	k := &redisKV{s: s, remote: remote}
	if s.cfg.Locality != "" {
		k.origin = metadata.Pairs(OriginMetadataKey, s.cfg.Locality)
	}
	return k
}

// disconnectCounters count the Redis connections the node closed, by
// reason: over --max-connections, a request over a limit, or a client too
// slow to take its replies (the output buffer limit).
func disconnectCounters(rs *resp.Server) []prometheus.Collector {
	var cs []prometheus.Collector
	for _, reason := range resp.DisconnectReasons {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_redis_disconnects_total",
			Help:        "Redis-protocol connections the node closed, by reason.",
			ConstLabels: prometheus.Labels{"reason": reason}}, func() float64 { return float64(rs.Disconnects(reason)) }))
	}
	return cs
}

func (k *redisKV) collectors() []prometheus.Collector {
	calls := func(path string, n *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_redis_kv_calls_total",
			Help:        "KV calls of the Redis front end: served in process (local) or through the routing client (routed).",
			ConstLabels: prometheus.Labels{"path": path}}, func() float64 { return float64(n.Load()) })
	}
	return []prometheus.Collector{calls("local", &k.local), calls("routed", &k.routed)}
}

// leader is this node's replica of key's range if it holds the lease,
// else nil.
func (k *redisKV) leader(key []byte) *raftstore.Replica {
	if r := k.s.store.LookupKey(key); r != nil && r.IsLeader() {
		return r
	}
	return nil
}

// firstLeader is leader of the first op's key (nil: no ops).
func (k *redisKV) firstLeader(ops []resp.Op) *raftstore.Replica {
	if len(ops) == 0 {
		return nil
	}
	return k.leader(ops[0].Key)
}

func (k *redisKV) in(ctx context.Context) context.Context {
	k.local.Add(1)
	ctx = admission.WithArrival(ctx, time.Time{}, admission.High, false)
	if k.origin == nil {
		return ctx
	}
	return metadata.NewIncomingContext(ctx, k.origin)
}

// routedKinds are the refusals of a local attempt that applied nothing and
// that the routing client knows how to handle.
var routedKinds = map[tidekvpb.ErrorKind]bool{
	tidekvpb.ErrorKind_NOT_LEASEHOLDER: true,
	tidekvpb.ErrorKind_RANGE_NOT_FOUND: true,
	tidekvpb.ErrorKind_KEY_MISMATCH:    true,
	tidekvpb.ErrorKind_STALE_REPLICA:   true,
	tidekvpb.ErrorKind_UNAVAILABLE:     true,
}

// outcome maps a local attempt's error (typed, or a status) to resp's
// sentinels, as the routing client and resp's client adapter would; route
// means "hand the call to the routing client". A write that timed out may
// have been applied, so it is ambiguous, as the client reports it.
func outcome(err error, write bool) (mapped error, route bool) {
	if err == nil {
		return nil, false
	}
	code, kind := classify(err)
	switch {
	case routedKinds[kind]:
		return nil, true
	case kind == tidekvpb.ErrorKind_INVALID_ARGUMENT || code == codes.InvalidArgument:
		return fmt.Errorf("%w: %s", resp.ErrInvalidArgument, errMessage(err)), false
	case kind == tidekvpb.ErrorKind_OVERLOADED:
		return &resp.OverloadedError{RetryAfter: retryAfter(err)}, false
	case kind == tidekvpb.ErrorKind_AMBIGUOUS:
		return fmt.Errorf("%w: %s", resp.ErrAmbiguous, errMessage(err)), false
	case code == codes.DeadlineExceeded && write:
		return fmt.Errorf("%w: %w", resp.ErrAmbiguous, context.DeadlineExceeded), false
	case code == codes.DeadlineExceeded:
		return context.DeadlineExceeded, false
	case code == codes.Canceled:
		return context.Canceled, false
	}
	return errors.New(errMessage(err)), false
}

// retryAfter is when an overloaded node asks to be retried: an admission
// refusal's hint, else the store's fixed one.
func retryAfter(err error) time.Duration {
	if d := errorDetail(err); d != nil {
		return time.Duration(d.GetRetryAfterMs()) * time.Millisecond
	}
	return 20 * time.Millisecond
}

// toRemote counts a call routed to another node and marks it, like the
// calls served in process, as the Redis front end's: PRIORITY_HIGH, never
// shed by queueing delay (its connections each wait for their answer, and
// Redis clients take a refusal as a failure; docs/admission.md).
func (k *redisKV) toRemote(ctx context.Context) context.Context {
	k.routed.Add(1)
	return client.WithPriority(ctx, tidekvpb.Priority_PRIORITY_HIGH)
}

func (k *redisKV) Get(ctx context.Context, key []byte) ([]byte, error) {
	if r := k.leader(key); r != nil {
		v, err := k.s.kv.Get(k.in(ctx), key, kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: r})
		if err, route := outcome(err, false); !route {
			switch {
			case err != nil:
				return nil, err
			case !v.Found:
				return nil, resp.ErrNotFound
			}
			return v.Value.Value, nil
		}
	}
	ctx = k.toRemote(ctx)
	return k.remote.Get(ctx, key)
}

func (k *redisKV) Put(ctx context.Context, key, value []byte) error {
	err := k.put(ctx, key, value)
	if err == nil && k.s.cfg.redisWrote != nil {
		k.s.cfg.redisWrote()
	}
	return err
}

func (k *redisKV) put(ctx context.Context, key, value []byte) error {
	if r := k.leader(key); r != nil {
		err := k.s.kv.Put(k.in(ctx), key, value, kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: r})
		if err, route := outcome(err, true); !route {
			return err
		}
	}
	ctx = k.toRemote(ctx)
	return k.remote.Put(ctx, key, value)
}

func (k *redisKV) Delete(ctx context.Context, key []byte) (bool, error) {
	if r := k.leader(key); r != nil {
		existed, err := k.s.kv.Delete(k.in(ctx), key, kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: r})
		if err, route := outcome(err, true); !route {
			return existed, err
		}
	}
	ctx = k.toRemote(ctx)
	return k.remote.Delete(ctx, key)
}

func (k *redisKV) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e resp.Expiry) (bool, []byte, bool, error) {
	if err := k.checkExpiry(resp.Op{Expiry: e}); err != nil {
		return false, nil, false, err
	}
	if lr := k.leader(key); lr != nil {
		req := &tidekvpb.CompareAndSetRequest{Key: key, ExpectExists: expected != nil, Delete: newValue == nil,
			TtlMs: raftstore.TTLMillis(e.TTL), ExpireAtMs: unixMillis(e.At), KeepTtl: e.Keep, Keyspace: keyspace.NameFrom(ctx)}
		if expected != nil {
			req.ExpectedValue = *expected
		}
		if newValue != nil {
			req.NewValue = *newValue
		}
		r, err := k.s.kv.CompareAndSet(k.in(ctx), req, kvapi.Options{KeySpace: req.GetKeyspace(), Replica: lr})
		if err, route := outcome(err, true); !route {
			return r.GetSucceeded(), r.GetCurrentValue(), r.GetCurrentExists(), err
		}
	}
	ctx = k.toRemote(ctx)
	return k.remote.CompareAndSet(ctx, key, expected, newValue, e)
}

// Write runs in process when this node leads the first key's range; the KV
// service then refuses ops that span ranges, as it does over gRPC.
func (k *redisKV) Write(ctx context.Context, ops []resp.Op) error {
	if err := k.checkExpiry(ops...); err != nil {
		return err
	}
	if r := k.firstLeader(ops); r != nil {
		err := k.s.kv.Write(k.in(ctx), writeOps(ops), kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: r})
		if err, route := outcome(err, true); !route {
			return err
		}
	}
	ctx = k.toRemote(ctx)
	return k.remote.Write(ctx, ops)
}

func (k *redisKV) GuardedWrite(ctx context.Context, ops []resp.Op, g resp.Guard) (resp.GuardResult, error) {
	if lr := k.firstLeader(ops); lr != nil {
		guard := &tidekvpb.WriteGuard{Key: g.Key, Value: g.Value, ClearStart: g.ClearStart, ClearEnd: g.ClearEnd}
		r, err := k.s.kv.GuardedWrite(k.in(ctx), writeOps(ops), guard, true, kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: lr})
		if err, route := outcome(err, true); !route {
			return resp.GuardResult{Failed: r.GetGuardFailed(), Existed: r.GetExisted()}, err
		}
	}
	ctx = k.toRemote(ctx)
	return k.remote.GuardedWrite(ctx, ops, g)
}

// checkExpiry refuses ops that set or change a TTL before the cluster is
// at log version 5. The store refuses them too, but a routed op may reach
// a node on an older binary, which would ignore the TTL (docs/expiry.md).
func (k *redisKV) checkExpiry(ops ...resp.Op) error {
	if k.s.store.LogVersion() >= raftstore.LogVersionExpiry {
		return nil
	}
	for _, op := range ops {
		if op.Expiry.TTL != 0 || !op.Expiry.At.IsZero() || op.SetTTL {
			return fmt.Errorf("%w: a TTL needs Raft log version %d on every node", raftstore.ErrLogVersion, raftstore.LogVersionExpiry)
		}
	}
	return nil
}

// unixMillis is an expiry time on the wire (0: none).
func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// writeOps are ops as the typed KV API's writes.
func writeOps(ops []resp.Op) []*tidekvpb.WriteOp {
	out := make([]*tidekvpb.WriteOp, len(ops))
	for i, op := range ops {
		w := &tidekvpb.WriteOp{Key: op.Key, Value: op.Value, TtlMs: raftstore.TTLMillis(op.Expiry.TTL), ExpireAtMs: unixMillis(op.Expiry.At),
			KeepTtl: op.Expiry.Keep}
		switch {
		case op.Delete:
			w.Kind, w.Value = tidekvpb.WriteOp_DELETE, nil
		case op.SetTTL:
			w.Kind, w.Value = tidekvpb.WriteOp_EXPIRE, nil
		}
		out[i] = w
	}
	return out
}

// BatchGet reads the keys of ranges this node leads in process, one call
// per range, and the rest through the routing client in one call.
func (k *redisKV) BatchGet(ctx context.Context, keys [][]byte) ([]resp.Result, error) {
	out := make([]resp.Result, len(keys))
	var order []*raftstore.Replica // led replicas in first-seen order, for determinism
	groups := map[*raftstore.Replica][]int{}
	var routed []int
	for i, key := range keys {
		r := k.leader(key)
		if r == nil {
			routed = append(routed, i)
			continue
		}
		if _, ok := groups[r]; !ok {
			order = append(order, r)
		}
		groups[r] = append(groups[r], i)
	}
	for _, r := range order {
		idx := groups[r]
		ks := make([][]byte, len(idx))
		for j, i := range idx {
			ks[j] = keys[i]
		}
		g, err := k.s.kv.BatchGet(k.in(ctx), ks, kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: r})
		if err, route := outcome(err, false); route {
			routed = append(routed, idx...)
			continue
		} else if err != nil {
			return nil, err
		}
		for j, i := range idx {
			res := g.Results[j]
			v := res.GetVersionTimestamp()
			out[i] = resp.Result{Value: res.GetValue(), Found: res.GetFound(), TTL: time.Duration(res.GetTtlMs()) * time.Millisecond,
				Version: resp.Version{WallTime: v.GetWallNanos(), Logical: v.GetLogical()}}
		}
	}
	if len(routed) == 0 {
		return out, nil
	}
	ctx = k.toRemote(ctx)
	sub := make([][]byte, len(routed))
	for j, i := range routed {
		sub[j] = keys[i]
	}
	rs, err := k.remote.BatchGet(ctx, sub)
	if err != nil {
		return nil, err
	}
	for j, i := range routed {
		out[i] = rs[j]
	}
	return out, nil
}

// Scan reads range by range in process while this node leads the range at
// the resume key, and hands the rest of the span to the routing client at
// the first range led elsewhere.
func (k *redisKV) Scan(ctx context.Context, start, end []byte, limit int) ([]resp.KeyValue, error) {
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil, nil
	}
	var out []resp.KeyValue
	for r := k.leader(start); r != nil; r = k.leader(start) {
		n := 0
		if limit > 0 {
			n = limit - len(out)
		}
		p, err := k.s.kv.Scan(k.in(ctx), start, end, n, false, kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: r})
		if err, route := outcome(err, false); route {
			break
		} else if err != nil {
			return nil, err
		}
		for _, kv := range p.KVs {
			out = append(out, resp.KeyValue{Key: kv.GetKey(), Value: kv.GetValue()})
		}
		next := p.Resume
		if (limit > 0 && len(out) >= limit) || len(next) == 0 || (len(end) > 0 && bytes.Compare(next, end) >= 0) {
			return out, nil
		}
		if bytes.Compare(next, start) <= 0 {
			return nil, fmt.Errorf("scan: the store returned resume key %q, not after start %q", next, start)
		}
		start = next
	}
	ctx = k.toRemote(ctx)
	rest := limit
	if limit > 0 {
		rest = limit - len(out)
	}
	kvs, err := k.remote.Scan(ctx, start, end, rest)
	if err != nil {
		return nil, err
	}
	return append(out, kvs...), nil
}

// Txn goes through the routing client: a transaction's coordinator is a
// node's Txn service, reached like any node's (this node's, mostly), and
// its reads and writes are routed by the coordinator.
func (k *redisKV) Txn(ctx context.Context, fn func(resp.TxnKV) error) error {
	return k.remote.Txn(k.toRemote(ctx), func(tx resp.TxnKV) error {
		if k.s.cfg.redisWrote != nil {
			tx = notedTx{TxnKV: tx, wrote: k.s.cfg.redisWrote}
		}
		return fn(tx)
	})
}

// notedTx calls wrote after each put kept for the commit (Config.redisWrote).
type notedTx struct {
	resp.TxnKV
	wrote func()
}

func (t notedTx) Put(ctx context.Context, key, value []byte) error {
	return t.noted(t.TxnKV.Put(ctx, key, value))
}

func (t notedTx) PutExpiring(ctx context.Context, key, value []byte, e resp.Expiry) error {
	return t.noted(t.TxnKV.PutExpiring(ctx, key, value, e))
}

func (t notedTx) noted(err error) error {
	if err == nil {
		t.wrote()
	}
	return err
}
