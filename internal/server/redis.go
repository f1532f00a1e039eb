package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/kvapi"
	"github.com/tidekv/tidekv/internal/nodereport"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/redisgw"
	"github.com/tidekv/tidekv/internal/resp"
)

// startRedis serves the Redis protocol through the gateway (redisgw.Front):
// commands on ranges this node leads run in process through the typed KV
// API (its limits, admission control and metrics, without gRPC); the
// others go through a routing client of this node, as gRPC clients'
// requests do.
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
	// A Redis command's transaction writes any number of keys (up to the
	// transaction's limits), sent to its coordinator no more a message
	// than a node takes in one request.
	ccfg.TxnWriteOps = s.cfg.Limits.MaxBatchKeys
	// Connections tell paced commands from ones sent ahead (resp.Paced)
	// while the node may shed.
	s.cfg.Redis.Shedding = s.adm.MayShed
	f, err := redisgw.Serve(redisgw.FrontConfig{Listener: s.cfg.Redis, Local: newRedisLocal(s), Routing: ccfg,
		Options: redisgw.Options{Wrote: s.cfg.redisWrote}, ByID: s.ks.ByID, Observer: s.metrics.ObserveRedis, Registry: s.metrics.Reg})
	if err != nil {
		return err
	}
	s.ports.redis = f
	return nil
}

// redisLocal is the node's typed KV API as the Redis gateway calls it
// (redisgw.Local): its handles are the led replicas, and its errors are
// mapped to resp's sentinels here (outcome).
type redisLocal struct {
	s *Server
	// origin is the node's locality as the routing client would send it, so
	// that in-process writes count for the same origin (internal/nodereport).
	origin metadata.MD
}

func newRedisLocal(s *Server) *redisLocal {
	k := &redisLocal{s: s}
	if s.cfg.Locality != "" {
		k.origin = metadata.Pairs(nodereport.OriginMetadataKey, s.cfg.Locality)
	}
	return k
}

func (k *redisLocal) Leader(key []byte) redisgw.Range {
	if r := k.s.store.LookupKey(key); r != nil && r.IsLeader() {
		return r
	}
	return nil
}

// in is ctx for a typed call: the command's arrival, when its connection
// read it, from which admission measures its queueing delay as it does a
// gRPC request's and sheds a write that waited too long (a read only
// counts; a refusal is answered "TRYAGAIN overloaded, retry after N ms",
// which Redis client libraries retry; docs/admission.md). A paced
// command (resp.Paced: its client waited for every earlier reply) is
// High, bounded by the in-flight cap only: a closed loop's queue is
// bounded by its connections and pipelines, and refusing it relieves
// nothing (redis-benchmark -P 16 stops at the first refusal).
func (k *redisLocal) in(ctx context.Context) context.Context {
	p := admission.Normal
	if resp.Paced(ctx) {
		p = admission.High
	}
	ctx = admission.WithArrival(ctx, resp.Arrival(ctx), p, false)
	if k.origin == nil {
		return ctx
	}
	return metadata.NewIncomingContext(ctx, k.origin)
}

// opts are the typed call's options on led replica r.
func opts(ctx context.Context, r redisgw.Range) kvapi.Options {
	return kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: r.(*raftstore.Replica)}
}

// mapped is outcome for the gateway: a refusal it should route is
// redisgw.ErrRoute.
func mapped(err error, write bool) error {
	err, route := outcome(err, write)
	if route {
		return redisgw.ErrRoute
	}
	return err
}

func (k *redisLocal) Get(ctx context.Context, r redisgw.Range, key []byte) ([]byte, bool, error) {
	v, err := k.s.kv.Get(k.in(ctx), key, opts(ctx, r))
	return v.Value.Value, v.Found, mapped(err, false)
}

func (k *redisLocal) Put(ctx context.Context, r redisgw.Range, key, value []byte) error {
	return mapped(k.s.kv.Put(k.in(ctx), key, value, opts(ctx, r)), true)
}

func (k *redisLocal) Delete(ctx context.Context, r redisgw.Range, key []byte) (bool, error) {
	existed, err := k.s.kv.Delete(k.in(ctx), key, opts(ctx, r))
	return existed, mapped(err, true)
}

func (k *redisLocal) BatchGet(ctx context.Context, r redisgw.Range, keys [][]byte) ([]resp.Result, error) {
	g, err := k.s.kv.BatchGet(k.in(ctx), keys, opts(ctx, r))
	if err != nil {
		return nil, mapped(err, false)
	}
	out := make([]resp.Result, len(keys))
	for j := range keys {
		res := g.Results[j]
		v := res.GetVersionTimestamp()
		out[j] = resp.Result{Value: res.GetValue(), Found: res.GetFound(), TTL: time.Duration(res.GetTtlMs()) * time.Millisecond,
			Version: resp.Version{WallTime: v.GetWallNanos(), Logical: v.GetLogical()}}
	}
	return out, nil
}

func (k *redisLocal) Scan(ctx context.Context, r redisgw.Range, start, end []byte, limit int) ([]resp.KeyValue, []byte, error) {
	p, err := k.s.kv.Scan(k.in(ctx), start, end, limit, false, opts(ctx, r))
	if err != nil {
		return nil, nil, mapped(err, false)
	}
	out := make([]resp.KeyValue, len(p.KVs))
	for i, kv := range p.KVs {
		out[i] = resp.KeyValue{Key: kv.GetKey(), Value: kv.GetValue()}
	}
	return out, p.Resume, nil
}

func (k *redisLocal) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e resp.Expiry) (bool, []byte, bool, error) {
	req := &tidekvpb.CompareAndSetRequest{Key: key, ExpectExists: expected != nil, Delete: newValue == nil,
		TtlMs: raftstore.TTLMillis(e.TTL), ExpireAtMs: unixMillis(e.At), KeepTtl: e.Keep, Keyspace: keyspace.NameFrom(ctx)}
	if expected != nil {
		req.ExpectedValue = *expected
	}
	if newValue != nil {
		req.NewValue = *newValue
	}
	r, err := k.s.kv.CompareAndSet(k.in(ctx), req, kvapi.Options{KeySpace: req.GetKeyspace()})
	return r.GetSucceeded(), r.GetCurrentValue(), r.GetCurrentExists(), mapped(err, true)
}

func (k *redisLocal) Increment(ctx context.Context, key []byte, by int64, e resp.Expiry) (bool, []byte, bool, error) {
	req := &tidekvpb.CompareAndSetRequest{Key: key, Increment: true, IncrementBy: by,
		TtlMs: raftstore.TTLMillis(e.TTL), ExpireAtMs: unixMillis(e.At), KeepTtl: e.Keep, Keyspace: keyspace.NameFrom(ctx)}
	r, err := k.s.kv.CompareAndSet(k.in(ctx), req, kvapi.Options{KeySpace: req.GetKeyspace()})
	return r.GetSucceeded(), r.GetCurrentValue(), r.GetCurrentExists(), mapped(err, true)
}

// Increments: the cluster's log version is raised only once every node's
// binary applies it, so a node that learnt version 12 may send an
// increment to any node.
func (k *redisLocal) Increments() bool {
	return k.s.store.LogVersion() >= raftstore.LogVersionIncrement
}

// SetPositions: version 13 is raised only once every node's binary has
// the Redis front end that keeps set positions and sorted-set start hints,
// so a node that learnt it may write them.
func (k *redisLocal) SetPositions() bool {
	return k.s.store.LogVersion() >= raftstore.LogVersionSetPositions
}

func (k *redisLocal) Write(ctx context.Context, ops []resp.Op, wantExisted bool, g *resp.Guard) (resp.GuardResult, error) {
	var guard *tidekvpb.WriteGuard
	if g != nil {
		guard = &tidekvpb.WriteGuard{Key: g.Key, Value: g.Value, ClearStart: g.ClearStart, ClearEnd: g.ClearEnd}
	}
	r, err := k.s.kv.GuardedWrite(k.in(ctx), writeOps(ops), guard, wantExisted, kvapi.Options{KeySpace: keyspace.NameFrom(ctx)})
	return resp.GuardResult{Failed: r.GetGuardFailed(), Existed: r.GetExisted()}, mapped(err, true)
}

func (k *redisLocal) CheckOp(op resp.Op) error {
	err := k.s.checkKey(op.Key)
	if err == nil {
		err = k.s.checkValue(op.Value)
	}
	if err == nil {
		err = k.CheckExpiry(op)
	}
	m, _ := outcome(err, true)
	return m
}

func (k *redisLocal) WriteLimits() (ops, bytes int) {
	return k.s.cfg.Limits.MaxBatchKeys, k.s.cfg.Limits.MaxWriteBytes
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
// refusal's hint, else the one every hintless refusal gets.
func retryAfter(err error) time.Duration {
	if d := errorDetail(err); d != nil {
		return time.Duration(d.GetRetryAfterMs()) * time.Millisecond
	}
	return resp.DefaultRetryAfter
}

// CheckExpiry refuses ops that set or change a TTL before the cluster is
// at log version 5. The store refuses them too, but a routed op may reach
// a node on an older binary, which would ignore the TTL (docs/expiry.md).
func (k *redisLocal) CheckExpiry(ops ...resp.Op) error {
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

// writeOps are a Redis write's ops as the typed API takes them.
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
