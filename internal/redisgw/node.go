package redisgw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/resp"
)

// ErrRoute is a local attempt's answer that it applied nothing and that
// the routing client knows how to handle (the lease moved, the range split,
// the node is not serving yet): the gateway hands the call to it.
var ErrRoute = errors.New("redisgw: route the call")

// Range is Local's handle on a range this node leads. Handles are
// compared to group keys by range, so a Local's handles must be
// comparable (a pointer, typically).
type Range any

// Local is the node's own typed KV API as the gateway calls it for ranges
// the node leads. Its errors are resp's sentinels already (the node maps
// its own errors at this edge), or ErrRoute; ctx names the key space
// (keyspace.NameFrom).
type Local interface {
	// Leader is the node's handle on key's range if it holds the lease,
	// else nil.
	Leader(key []byte) Range
	Get(ctx context.Context, r Range, key []byte) (value []byte, found bool, err error)
	Put(ctx context.Context, r Range, key, value []byte) error
	Delete(ctx context.Context, r Range, key []byte) (existed bool, err error)
	BatchGet(ctx context.Context, r Range, keys [][]byte) ([]resp.Result, error)
	// Scan reads at most limit keys (0: the node's maximum) of [start,
	// end) in r; resume is where the next page starts (nil: done).
	Scan(ctx context.Context, r Range, start, end []byte, limit int) (kvs []resp.KeyValue, resume []byte, err error)
	// CompareAndSet and Write run on the range of their (first) key, which
	// the node looks up; Write refuses ops that span ranges. Write reports
	// per op whether its key existed when wantExisted; g, when not nil,
	// guards it.
	CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e resp.Expiry) (swapped bool, current []byte, exists bool, err error)
	Write(ctx context.Context, ops []resp.Op, wantExisted bool, g *resp.Guard) (resp.GuardResult, error)
	// Increment is resp.Incrementer's, on the range of key, which the
	// node looks up.
	Increment(ctx context.Context, key []byte, by int64, e resp.Expiry) (applied bool, before []byte, beforeExists bool, err error)
	// Increments reports whether every node applies increments: a routed
	// one may reach any node, and an older binary would take it for a
	// compare-and-set.
	Increments() bool
	// SetPositions reports whether every node's Redis front end keeps
	// the collection layouts of resp.SetPositioner: a front end on an
	// older binary, on any node, may write the same keys.
	SetPositions() bool
	// CheckOp applies the node's key and value limits and CheckExpiry to
	// one op, so that an invalid op fails alone instead of failing its
	// group's Write.
	CheckOp(op resp.Op) error
	// CheckExpiry refuses ops that set or change a TTL before every node
	// can keep one: a routed op may reach a node on an older binary.
	CheckExpiry(ops ...resp.Op) error
	// WriteLimits are the most ops and bytes one Write may carry.
	WriteLimits() (ops, bytes int)
}

// Gateway is the Redis front end's KV on a node: in process (Local) when
// this node holds the lease of a key's range, through the routing client
// (remote) otherwise. A local attempt answered ErrRoute is handed to the
// routing client, which redirects, backs off and retries as it does for
// every client. A local "overloaded, retry" is the Redis client's answer:
// this node's admission refused it.
type Gateway struct {
	local  Local
	remote resp.KV
	// wrote, when set (tests), is called after each put the gateway made,
	// and after each put a transaction kept for its commit.
	wrote func()
	// Calls served in process and through the routing client.
	localCalls, routed atomic.Uint64
}

// Options are a Gateway's hooks.
type Options struct {
	// Wrote, when set (tests), is called after each put.
	Wrote func()
}

// New is the gateway over local and remote.
func New(local Local, remote resp.KV, o Options) *Gateway {
	return &Gateway{local: local, remote: remote, wrote: o.Wrote}
}

// Routed is how many calls went through the routing client.
func (k *Gateway) Routed() uint64 { return k.routed.Load() }

// Collectors count the calls served in process and routed.
func (k *Gateway) Collectors() []prometheus.Collector {
	calls := func(path string, n *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_redis_kv_calls_total",
			Help:        "KV calls of the Redis front end: served in process (local) or through the routing client (routed).",
			ConstLabels: prometheus.Labels{"path": path}}, func() float64 { return float64(n.Load()) })
	}
	return []prometheus.Collector{calls("local", &k.localCalls), calls("routed", &k.routed)}
}

// DisconnectCounters count the Redis connections rs closed, by reason:
// over --max-connections, a request over a limit, or a client too slow to
// take its replies (the output buffer limit).
func DisconnectCounters(rs *resp.Server) []prometheus.Collector {
	var cs []prometheus.Collector
	for _, reason := range resp.DisconnectReasons {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_redis_disconnects_total",
			Help:        "Redis-protocol connections the node closed, by reason.",
			ConstLabels: prometheus.Labels{"reason": reason}}, func() float64 { return float64(rs.Disconnects(reason)) }))
	}
	return cs
}

// leads reports whether this node holds the lease of key's range.
func (k *Gateway) leads(key []byte) bool { return k.local.Leader(key) != nil }

// routedAnswer splits a local answer: route says "hand the call to the
// routing client"; otherwise err is the answer.
func routedAnswer(err error) (answer error, route bool) {
	if errors.Is(err, ErrRoute) {
		return nil, true
	}
	return err, false
}

// inProcess counts a call tried in process.
func (k *Gateway) inProcess() Local {
	k.localCalls.Add(1)
	return k.local
}

// viaRemote counts a call routed to another node. Its priority is the
// Redis command's: a paced command (resp.Paced, its client waited for
// every earlier reply) is high, as in process, so the leaseholder bounds
// it by its in-flight cap only; any other is normal, admitted by the
// leaseholder's own queueing delay as any client's request.
func (k *Gateway) viaRemote(ctx context.Context) context.Context {
	k.routed.Add(1)
	if resp.Paced(ctx) {
		return client.WithPriority(ctx, tidekvpb.Priority_PRIORITY_HIGH)
	}
	return ctx
}

func (k *Gateway) Get(ctx context.Context, key []byte) ([]byte, error) {
	if r := k.local.Leader(key); r != nil {
		v, found, err := k.inProcess().Get(ctx, r, key)
		if err, route := routedAnswer(err); !route {
			switch {
			case err != nil:
				return nil, err
			case !found:
				return nil, resp.ErrNotFound
			}
			return v, nil
		}
	}
	return k.remote.Get(k.viaRemote(ctx), key)
}

func (k *Gateway) Put(ctx context.Context, key, value []byte) error {
	err := k.put(ctx, key, value)
	if err == nil && k.wrote != nil {
		k.wrote()
	}
	return err
}

func (k *Gateway) put(ctx context.Context, key, value []byte) error {
	if r := k.local.Leader(key); r != nil {
		if err, route := routedAnswer(k.inProcess().Put(ctx, r, key, value)); !route {
			return err
		}
	}
	return k.remote.Put(k.viaRemote(ctx), key, value)
}

func (k *Gateway) Delete(ctx context.Context, key []byte) (bool, error) {
	if r := k.local.Leader(key); r != nil {
		existed, err := k.inProcess().Delete(ctx, r, key)
		if err, route := routedAnswer(err); !route {
			return existed, err
		}
	}
	return k.remote.Delete(k.viaRemote(ctx), key)
}

func (k *Gateway) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e resp.Expiry) (bool, []byte, bool, error) {
	if err := k.local.CheckExpiry(resp.Op{Expiry: e}); err != nil {
		return false, nil, false, err
	}
	if k.leads(key) {
		ok, cur, exists, err := k.inProcess().CompareAndSet(ctx, key, expected, newValue, e)
		if err, route := routedAnswer(err); !route {
			return ok, cur, exists, err
		}
	}
	return k.remote.CompareAndSet(k.viaRemote(ctx), key, expected, newValue, e)
}

// Increment runs in process when this node leads key's range, else
// through the routing client; before every node applies increments, or
// when the routing client has none, it is errors.ErrUnsupported (INCR
// then runs as a compare-and-set loop).
func (k *Gateway) Increment(ctx context.Context, key []byte, by int64, e resp.Expiry) (bool, []byte, bool, error) {
	inc, ok := k.remote.(resp.Incrementer)
	if !ok || !k.local.Increments() {
		return false, nil, false, fmt.Errorf("%w: increments need every node's binary to apply them", errors.ErrUnsupported)
	}
	if err := k.local.CheckExpiry(resp.Op{Expiry: e}); err != nil {
		return false, nil, false, err
	}
	if k.leads(key) {
		ok, before, existed, err := k.inProcess().Increment(ctx, key, by, e)
		if err, route := routedAnswer(err); !route {
			return ok, before, existed, err
		}
	}
	return inc.Increment(k.viaRemote(ctx), key, by, e)
}

// SetPositions is resp.SetPositioner's: the node's word on whether every
// node's front end keeps the new layouts.
func (k *Gateway) SetPositions() bool { return k.local.SetPositions() }

// Write runs in process when this node leads the first key's range; the
// node then refuses ops that span ranges, as it does over gRPC.
func (k *Gateway) Write(ctx context.Context, ops []resp.Op) error {
	if err := k.local.CheckExpiry(ops...); err != nil {
		return err
	}
	if len(ops) > 0 && k.leads(ops[0].Key) {
		_, err := k.inProcess().Write(ctx, ops, false, nil)
		if err, route := routedAnswer(err); !route {
			return err
		}
	}
	return k.remote.Write(k.viaRemote(ctx), ops)
}

func (k *Gateway) GuardedWrite(ctx context.Context, ops []resp.Op, g resp.Guard) (resp.GuardResult, error) {
	if len(ops) > 0 && k.leads(ops[0].Key) {
		res, err := k.inProcess().Write(ctx, ops, true, &g)
		if err, route := routedAnswer(err); !route {
			return res, err
		}
	}
	return k.remote.GuardedWrite(k.viaRemote(ctx), ops, g)
}

// BatchGet reads the keys of ranges this node leads in process, one call
// per range, and the rest through the routing client in one call.
func (k *Gateway) BatchGet(ctx context.Context, keys [][]byte) ([]resp.Result, error) {
	out := make([]resp.Result, len(keys))
	var order []Range // led ranges in first-seen order, for determinism
	groups := map[Range][]int{}
	var routed []int
	for i, key := range keys {
		r := k.local.Leader(key)
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
		res, err := k.inProcess().BatchGet(ctx, r, ks)
		if err, route := routedAnswer(err); route {
			routed = append(routed, idx...)
			continue
		} else if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out[i] = res[j]
		}
	}
	if len(routed) == 0 {
		return out, nil
	}
	sub := make([][]byte, len(routed))
	for j, i := range routed {
		sub[j] = keys[i]
	}
	rs, err := k.remote.BatchGet(k.viaRemote(ctx), sub)
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
func (k *Gateway) Scan(ctx context.Context, start, end []byte, limit int) ([]resp.KeyValue, error) {
	if len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil, nil
	}
	var out []resp.KeyValue
	for r := k.local.Leader(start); r != nil; r = k.local.Leader(start) {
		n := 0
		if limit > 0 {
			n = limit - len(out)
		}
		kvs, next, err := k.inProcess().Scan(ctx, r, start, end, n)
		if err, route := routedAnswer(err); route {
			break
		} else if err != nil {
			return nil, err
		}
		out = append(out, kvs...)
		if (limit > 0 && len(out) >= limit) || len(next) == 0 || (len(end) > 0 && bytes.Compare(next, end) >= 0) {
			return out, nil
		}
		if bytes.Compare(next, start) <= 0 {
			return nil, fmt.Errorf("scan: the store returned resume key %q, not after start %q", next, start)
		}
		start = next
	}
	rest := limit
	if limit > 0 {
		rest = limit - len(out)
	}
	kvs, err := k.remote.Scan(k.viaRemote(ctx), start, end, rest)
	if err != nil {
		return nil, err
	}
	return append(out, kvs...), nil
}

// Txn goes through the routing client: a transaction's coordinator is a
// node's Txn service, reached like any node's (this node's, mostly), and
// its reads and writes are routed by the coordinator.
func (k *Gateway) Txn(ctx context.Context, fn func(resp.TxnKV) error) error {
	return k.remote.Txn(k.viaRemote(ctx), func(tx resp.TxnKV) error {
		if k.wrote != nil {
			tx = notedTx{TxnKV: tx, wrote: k.wrote}
		}
		return fn(tx)
	})
}

// notedTx calls wrote after each put kept for the commit (Options.Wrote).
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

// WriteEach writes a pipeline's ops: those of each range this node leads
// in one Write (one Raft proposal, atomic, which is allowed: each op only
// needs to apply once), split where the node's batch limits require; the
// ops of ranges led elsewhere, and of groups the store refused without
// applying them (the lease moved, the range split), through the routing
// client. An op that fails validation fails alone, before grouping.
//
// Order per key is kept: every op on one key joins the same group, a group
// is written chunk by chunk in order and, once a chunk is refused, its
// later chunks are routed too, after it.
func (k *Gateway) WriteEach(ctx context.Context, ops []resp.Op) []resp.OpResult {
	out := make([]resp.OpResult, len(ops))
	k.WritePlanned(ctx, ops, k.Plan(ops, out), out)
	return out
}

// WritePlan is where a WriteEach's ops go: groups of ops (indexes) per
// range this node leads, in first-seen order, and the ops to route.
type WritePlan struct {
	Groups [][]int
	Routed []int
}

// Plan is WriteEach's first half: it validates ops (an invalid op's error
// goes to out) and groups the valid ones by the led range holding their
// key. It is apart from WritePlanned so that a test can move the ranges
// between the two.
func (k *Gateway) Plan(ops []resp.Op, out []resp.OpResult) WritePlan {
	var p WritePlan
	group := map[Range]int{} // range → index in p.Groups
	byKey := make(map[string]Range, len(ops))
	for i, op := range ops {
		if err := k.local.CheckOp(op); err != nil {
			out[i].Err = err
			continue
		}
		r, seen := byKey[string(op.Key)]
		if !seen {
			r = k.local.Leader(op.Key)
			byKey[string(op.Key)] = r
		}
		if r == nil {
			p.Routed = append(p.Routed, i)
			continue
		}
		g, ok := group[r]
		if !ok {
			g = len(p.Groups)
			group[r] = g
			p.Groups = append(p.Groups, nil)
		}
		p.Groups[g] = append(p.Groups[g], i)
	}
	return p
}

// WritePlanned is WriteEach's second half: it writes each group in
// process, chunk by chunk, and routes what is left.
func (k *Gateway) WritePlanned(ctx context.Context, ops []resp.Op, p WritePlan, out []resp.OpResult) {
	routed := p.Routed
	for _, g := range p.Groups {
		chunks := k.chunks(ops, g)
		for c, idx := range chunks {
			if !k.writeLocal(ctx, ops, idx, out) {
				for _, rest := range chunks[c:] {
					routed = append(routed, rest...)
				}
				break
			}
		}
	}
	if len(routed) == 0 {
		return
	}
	ctx = k.viaRemote(ctx)
	slices.Sort(routed)
	sub := make([]resp.Op, len(routed))
	for j, i := range routed {
		sub[j] = ops[i]
	}
	for j, res := range k.remote.WriteEach(ctx, sub) {
		out[routed[j]] = res
	}
}

// chunks cuts a group's ops (indexes into ops) into Writes within the
// node's limits on ops and bytes per Write.
func (k *Gateway) chunks(ops []resp.Op, idx []int) [][]int {
	maxOps, maxBytes := k.local.WriteLimits()
	var out [][]int
	start, size := 0, 0
	for j, i := range idx {
		n := len(ops[i].Key) + len(ops[i].Value)
		if j > start && (j-start >= maxOps || size+n > maxBytes) {
			out = append(out, idx[start:j])
			start, size = j, 0
		}
		size += n
	}
	return append(out, idx[start:])
}

// writeLocal writes the ops idx of one range in one Write and fills their
// results; it returns false, having applied nothing, when the store
// refused the Write in a way the routing client handles.
func (k *Gateway) writeLocal(ctx context.Context, ops []resp.Op, idx []int, out []resp.OpResult) bool {
	sub := make([]resp.Op, len(idx))
	wantExisted := false
	for j, i := range idx {
		sub[j] = ops[i]
		wantExisted = wantExisted || reportsExisted(ops[i])
	}
	// Only deletes and SetTTL ops report whether their key existed; asking
	// costs a read per op at apply, so a group of puts does not.
	r, err := k.inProcess().Write(ctx, sub, wantExisted, nil)
	err, route := routedAnswer(err)
	// Every op passed CheckOp and the chunk is within the limits, so an
	// invalid argument here can only be the node finding the keys outside
	// the range: it split since Plan. Nothing was applied.
	if route || errors.Is(err, resp.ErrInvalidArgument) {
		return false
	}
	for j, i := range idx {
		out[i].Err = err
		if err == nil && reportsExisted(ops[i]) && j < len(r.Existed) {
			out[i].Existed = r.Existed[j]
		}
	}
	return true
}

// reportsExisted: the op's result says whether its key held a value.
func reportsExisted(op resp.Op) bool { return op.Delete || op.SetTTL }
