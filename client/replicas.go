package client

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Replica choice for BOUNDED and ANY reads (docs/read-modes.md).
//
// Each replica costs score + RTTWeight·rtt/1ms: score is the node's load
// score from Admin.NodeLoads, polled in the background; rtt is this
// client's moving average of its round trips to the node. Replicas that
// recently failed, look hung, or refused this range's bound as stale are
// left out. The cheapest remaining replica wins; near-equal ones share the
// load at random.

// readTuning holds the timing constants of replica choice, in one place so
// that tests can shorten them.
type readTuning struct {
	pollInterval time.Duration // NodeLoads period
	pollTimeout  time.Duration // bound on one NodeLoads call
	maxLoadAge   time.Duration // older load samples are stale
	penaltyBase  time.Duration // exclusion after one failure
	penaltyMax   time.Duration // cap as consecutive failures double it
	stallAfter   time.Duration // busy without any reply this long: hung
	staleHintFor time.Duration // how long a STALE_REPLICA answer is remembered
	rttMaxAge    time.Duration // a round trip older than this is forgotten
}

func defaultReadTuning() readTuning {
	return readTuning{
		pollInterval: 500 * time.Millisecond,
		pollTimeout:  time.Second,
		maxLoadAge:   3 * time.Second,
		penaltyBase:  time.Second,
		penaltyMax:   4 * time.Second,
		stallAfter:   time.Second,
		staleHintFor: time.Second,
		rttMaxAge:    3 * time.Second,
	}
}

// Replicas whose costs are within tieScore points of the cheapest, and
// whose round trips are within tieRTTMs of the nearest of those, are equal:
// measured costs never tie exactly, and without a band every client would
// pile onto whichever replica is a hair cheaper until the next poll.
const (
	tieScore = 0.5
	tieRTTMs = 0.5
)

// monoEpoch anchors monoNow: a monotonic clock as an int64 that fits atomics.
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) }

// peerStats is what the client has observed of one node address. It is
// shared by every request and updated with atomics only.
type peerStats struct {
	rtt          atomic.Int64 // moving average round trip, ns; 0 until the first reply
	inflight     atomic.Int32 // KV RPCs in flight
	lastReply    atomic.Int64 // mono ns of the last KV reply
	lastProgress atomic.Int64 // lastReply, or later when it went busy
	penaltyUntil atomic.Int64 // mono ns; excluded from replica choice until then
	strikes      atomic.Int32 // failures since the last success
	// window bounds the KV requests kept in flight to the node (float64
	// bits; 0: unbounded), as TCP's congestion window bounds bytes: a
	// refusal from the overloaded node cuts it to what was in flight times
	// the share the node admits, and every success widens it by 1/window.
	// Requests over it are refused here. Beyond what a node can read, the
	// excess waits in front of it, where the node cannot see it, and
	// refusing costs the node as much as serving a cached read, so only the
	// client can keep that queue short.
	window    atomic.Uint64
	cutAt     atomic.Int64 // mono ns of the last cut: one per round trip
	shareHint atomic.Int64 // the retry hint of the last refusal, ns
}

const (
	minWindow = 4
	// maxWindow: a window grown back this far means no bound again.
	maxWindow = 1 << 16
)

// cut narrows the window after the node refused a request as overloaded,
// admitting share of its requests (0: unknown, taken as a half).
func (p *peerStats) cut(now int64, share float64, hint time.Duration) {
	p.shareHint.Store(int64(hint))
	if last := p.cutAt.Load(); last != 0 && now-last < max(p.rtt.Load(), int64(10*time.Millisecond)) {
		return
	}
	p.cutAt.Store(now)
	if share <= 0 || share >= 1 {
		share = 0.5
	}
	base := float64(p.inflight.Load())
	if w := math.Float64frombits(p.window.Load()); w > 0 {
		base = min(base, w)
	}
	p.window.Store(math.Float64bits(max(minWindow, base*share)))
}

// widen grows the window after a success.
func (p *peerStats) widen() {
	old := p.window.Load()
	w := math.Float64frombits(old)
	if w == 0 {
		return
	}
	if w += 1 / w; w >= maxWindow {
		w = 0
	}
	p.window.CompareAndSwap(old, math.Float64bits(w)) // a lost update only delays growth
}

// throttled reports whether a new request would exceed the window, with
// the node's last retry hint.
func (p *peerStats) throttled() (time.Duration, bool) {
	w := math.Float64frombits(p.window.Load())
	return time.Duration(p.shareHint.Load()), w > 0 && float64(p.inflight.Load()) >= w
}

// observe folds one round trip into the average with weight 1/4: one
// outlier moves it a quarter of the way, a lasting change wins within a few
// replies. A single CAS keeps it wait-free; a sample lost to a concurrent
// update is harmless for an average.
func (p *peerStats) observe(sample int64) {
	sample = max(sample, 1) // 0 means "never measured"
	old := p.rtt.Load()
	next := sample
	if old != 0 {
		next = old + (sample-old)/4
	}
	p.rtt.CompareAndSwap(old, max(next, 1))
}

// penalise excludes the peer from replica choice for base·2^(strikes-1),
// capped at penaltyMax, and for at least atLeast (a server's retry_after).
func (p *peerStats) penalise(now int64, t *readTuning, atLeast time.Duration) {
	n := p.strikes.Add(1)
	d := t.penaltyBase
	for i := int32(1); i < n && d < t.penaltyMax; i++ {
		d *= 2
	}
	d = max(min(d, t.penaltyMax), atLeast)
	p.penaltyUntil.Store(now + int64(d))
}

// shed excludes the peer for the server's retry hint only (a default of
// 20 ms without one): an overloaded node is healthy and sheds load in
// bursts, and a failure-sized penalty would push every read onto the one
// replica left.
func (p *peerStats) shed(now int64, retryAfter time.Duration) {
	if retryAfter <= 0 {
		retryAfter = 20 * time.Millisecond
	}
	if until := now + int64(retryAfter); until > p.penaltyUntil.Load() {
		p.penaltyUntil.Store(until)
	}
}

// succeeded ends the run of failures (the penalty in force runs out by
// itself). The load first keeps the common case free of writes.
func (p *peerStats) succeeded() {
	if p.strikes.Load() != 0 {
		p.strikes.Store(0)
	}
}

// excluded reports whether the peer is penalised, or busy with no reply for
// stallAfter (a hung node that has not failed anything yet).
func (p *peerStats) excluded(now, stallAfter int64) bool {
	if now < p.penaltyUntil.Load() {
		return true
	}
	return p.inflight.Load() > 0 && now-p.lastProgress.Load() > stallAfter
}

// Round trips of KV requests and load polls are measured; admin operations
// can legitimately take seconds and would say nothing about distance. Only
// KV requests count for stall detection: a node whose request path hangs
// may still answer load polls.
func measured(method string) (rtt, stall bool) {
	kv := strings.HasPrefix(method, "/tidekv.KV/")
	return kv || method == tidekvpb.Admin_NodeLoads_FullMethodName, kv
}

// interceptor measures round trips to addr and adds the emulated latency.
// The delays are inside the measurement, so emulated distance steers
// replica choice as real distance would.
func (p *peerStats) interceptor(addr string, latency func(string) time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var d time.Duration
		if latency != nil {
			d = latency(addr)
		}
		sample, stall := measured(method)
		start := monoNow()
		if stall {
			if p.inflight.Add(1) == 1 {
				p.lastProgress.Store(start)
			}
			defer p.inflight.Add(-1)
		}
		if d > 0 && !sleep(ctx, d) {
			return status.FromContextError(ctx.Err()).Err()
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if d > 0 && !sleep(ctx, d) {
			// The reply is still "on the wire" when the deadline passes.
			return status.FromContextError(ctx.Err()).Err()
		}
		if sample && replied(err) {
			end := monoNow()
			p.observe(end - start)
			if stall {
				p.lastReply.Store(end)
				p.lastProgress.Store(end)
				if err == nil {
					p.succeeded()
					p.widen()
				}
			}
		}
		return err
	}
}

// replied reports whether err (or success) is the server's answer, as
// opposed to a transport failure or timeout, which measure nothing.
func replied(err error) bool {
	if err == nil {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return len(st.Proto().GetDetails()) > 0 // a TideKV answer carries a detail
	}
	return true
}

// abandonIfStalled cancels a BOUNDED or ANY read's attempt at p's node if,
// stallAfter after it was sent, the node has not answered any KV request
// since: a hung replica would otherwise hold the read for the whole attempt
// timeout. Reads are idempotent, so the next replica can simply be tried.
func (c *Client) abandonIfStalled(p *peerStats, cancel context.CancelFunc) *time.Timer {
	sent := monoNow()
	return time.AfterFunc(c.tune.stallAfter, func() {
		if p.lastReply.Load() < sent {
			cancel()
		}
	})
}

// peer returns the stats of addr, creating them on first use. Entries are
// never removed: there is one per cluster address.
func (c *Client) peer(addr string) *peerStats {
	if p, ok := c.peers.Load(addr); ok {
		return p.(*peerStats)
	}
	p, _ := c.peers.LoadOrStore(addr, new(peerStats))
	return p.(*peerStats)
}

// markDown records a failure of nc's node: suspect for leaseholder routing,
// penalised for replica choice.
func (c *Client) markDown(nc *nodeConn, atLeast time.Duration) {
	c.sus.mark(nc.addr)
	nc.peer.penalise(monoNow(), &c.tune, atLeast)
}

// ---------- Node loads ----------

// loadView is an immutable table of node scores, built by the poller and
// read by every request through an atomic pointer.
type loadView struct {
	dense    []float64          // by node id, for small ids (the common case)
	sparse   map[uint64]float64 // larger ids
	fallback float64            // any node without a fresh score
	fresh    int                // how many scores were fresh
}

// maxDenseID bounds the dense table; node ids are allocated from 1 upwards.
const maxDenseID = 4096

// maxScore keeps an infinite or absurd score finite so that cost arithmetic
// still orders such nodes.
const maxScore = 1e9

var emptyLoadView = &loadView{}

func (v *loadView) score(id uint64) float64 {
	if id < uint64(len(v.dense)) {
		return v.dense[id]
	}
	if s, ok := v.sparse[id]; ok {
		return s
	}
	return v.fallback
}

// buildLoadView turns the newest sample per node into a loadView as of now.
// A sample older than maxAge, or with a NaN score, is stale: such nodes, and
// nodes never heard of, get the median of the fresh scores (0 if none), so
// that an unknown node is neither shunned nor preferred.
func buildLoadView(samples map[uint64]*tidekvpb.NodeLoad, now time.Time, maxAge time.Duration) *loadView {
	oldest := now.Add(-maxAge).UnixNano()
	fresh := make(map[uint64]float64, len(samples))
	scores := make([]float64, 0, len(samples))
	var maxID uint64
	for id, l := range samples {
		s := l.GetScore()
		if l.GetUnixNanos() < oldest || math.IsNaN(s) {
			continue
		}
		s = min(max(s, 0), maxScore)
		fresh[id] = s
		scores = append(scores, s)
		if id < maxDenseID {
			maxID = max(maxID, id)
		}
	}
	v := &loadView{fallback: median(scores), fresh: len(fresh)}
	if len(fresh) == 0 {
		return v
	}
	v.dense = make([]float64, maxID+1)
	for i := range v.dense {
		v.dense[i] = v.fallback
	}
	for id, s := range fresh {
		if id < maxDenseID {
			v.dense[id] = s
		} else {
			if v.sparse == nil {
				v.sparse = map[uint64]float64{}
			}
			v.sparse[id] = s
		}
	}
	return v
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// pollState is the Client's poller bookkeeping.
type pollState struct {
	pollMu      sync.Mutex
	pollStarted atomic.Bool
	pollDone    chan struct{} // closed when the poller exits
}

// startPoller starts the NodeLoads poller unless it runs or the client is
// closed. It is started by the first BOUNDED or ANY read, so that clients
// that only read linearizably never poll.
func (c *Client) startPoller() {
	if c.pollStarted.Load() {
		return
	}
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	if c.pollStarted.Load() || c.closed.Load() {
		return
	}
	c.pollDone = make(chan struct{})
	c.pollStarted.Store(true)
	go c.pollLoads(c.pollDone)
}

// pollLoads polls NodeLoads every pollInterval until Close, rotating over
// the known nodes: any node knows every node's load, and rotating also
// refreshes the round trip to nodes that reads currently avoid. The view is
// rebuilt even when a poll fails, so that scores age into staleness. Every
// rangeRefreshEvery polls it also reloads the range map: replicas placement
// adds (adaptive learners for hot ranges) cause no routing error, so a
// client reading in bounded/any mode would otherwise never learn of them.
// rangeRefreshEvery: with the default 500 ms poll, the range map of a
// client doing relaxed reads is at most about 5 s old.
const rangeRefreshEvery = 10

func (c *Client) pollLoads(done chan struct{}) {
	defer close(done)
	samples := map[uint64]*tidekvpb.NodeLoad{}
	t := time.NewTicker(c.tune.pollInterval)
	defer t.Stop()
	for turn := 0; ; turn++ {
		c.pollOnce(samples, turn)
		c.loads.Store(buildLoadView(samples, time.Now(), c.tune.maxLoadAge))
		if turn > 0 && turn%rangeRefreshEvery == 0 {
			c.refreshAsync(c.cache.load().epoch)
		}
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pollOnce asks up to two nodes, starting at the turn's one and skipping
// penalised nodes while others remain, and merges the newest sample of
// each node into samples.
func (c *Client) pollOnce(samples map[uint64]*tidekvpb.NodeLoad, turn int) {
	addrs := c.cache.load().addrs
	n := len(addrs)
	if n == 0 {
		return
	}
	now := monoNow()
	order := make([]string, 0, n)
	var later []string
	for i := range n {
		a := addrs[(turn+i)%n]
		if now < c.peer(a).penaltyUntil.Load() {
			later = append(later, a)
		} else {
			order = append(order, a)
		}
	}
	order = append(order, later...)
	for _, a := range order[:min(2, len(order))] {
		if c.ctx.Err() != nil {
			return
		}
		nc, err := c.conns.get(a)
		if err != nil {
			return // closed
		}
		ctx, cancel := context.WithTimeout(c.ctx, min(c.tune.pollTimeout, c.cfg.AttemptTimeout))
		resp, err := nc.admin.NodeLoads(ctx, &tidekvpb.NodeLoadsRequest{})
		cancel()
		if err == nil {
			for _, l := range resp.GetLoads() {
				id := l.GetNodeId()
				if cur := samples[id]; id != 0 && (cur == nil || cur.GetUnixNanos() <= l.GetUnixNanos()) {
					samples[id] = l
				}
			}
			return
		}
		if c.ctx.Err() != nil {
			return
		}
		// Only an unreachable or hung node is penalised: an old server
		// (Unimplemented) or one still starting may serve reads fine.
		if classify(status.Convert(err), nil) == classTransport {
			nc.peer.penalise(monoNow(), &c.tune, 0)
		}
	}
}

// ---------- Choice ----------

// replicaRef is one replica of a cached range resolved to its address and
// stats. refs are parallel to the descriptor's replicas; peer is nil for a
// replica whose node address is unknown.
type replicaRef struct {
	id   uint64
	addr string
	peer *peerStats
}

// replicaSet caches a range's resolved replicas for one version of the
// node address table.
type replicaSet struct {
	nodesGen uint64
	refs     []replicaRef
}

// staleHint remembers that a replica refused a read of its range, so that
// reads it would refuse again skip it for a while: STALE_REPLICA refuses
// bounded reads with the same or a tighter bound; RANGE_NOT_FOUND (no
// replica there after all) refuses every read, recorded as anyBound. The
// two fields race benignly: it is a hint.
type staleHint struct {
	until atomic.Int64 // mono ns
	bound atomic.Int64 // the refused bound, ns
}

// anyBound is the staleness bound of an ANY read for staleHint: looser than
// any BOUNDED read, so only "refuses everything" hints apply to it.
const anyBound = time.Duration(math.MaxInt64)

func (h *staleHint) set(now int64, forDur, bound time.Duration) {
	h.bound.Store(int64(bound))
	h.until.Store(now + int64(forDur))
}

func (h *staleHint) applies(now int64, bound time.Duration) bool {
	return now < h.until.Load() && int64(bound) <= h.bound.Load()
}

// replicasOf returns e's replicas resolved against s's node table, cached in
// e until the table changes.
func (c *Client) replicasOf(s *snapshot, e *rangeEntry) []replicaRef {
	if rs := e.reps.Load(); rs != nil && rs.nodesGen == s.nodesGen {
		return rs.refs
	}
	reps := e.desc.GetReplicas()
	refs := make([]replicaRef, len(reps))
	for i, rd := range reps {
		if a := s.nodes[rd.GetNodeId()]; a != "" {
			refs[i] = replicaRef{id: rd.GetNodeId(), addr: a, peer: c.peer(a)}
		}
	}
	e.reps.Store(&replicaSet{nodesGen: s.nodesGen, refs: refs})
	return refs
}

// pickInput is everything chooseReplica looks at.
type pickInput struct {
	refs       []replicaRef
	stale      []staleHint // parallel to refs; may be shorter or nil
	loads      *loadView
	rttWeight  float64
	bound      time.Duration // a BOUNDED read's bound; anyBound for ANY
	now        int64         // mono ns
	stallAfter int64         // ns
	rttMaxAge  int64         // ns; 0 keeps every round trip
	rnd        uint64        // random bits for breaking ties
	skip       uint64        // bit i: refs[i] already tried by this request
}

// chooseReplica returns the index in refs of the replica to try next, or -1
// when none is eligible (all tried, unresolved, penalised, hung, or known to
// refuse this read). It is pure: it reads only its input (and the
// atomics of the peers it names), no clock, no shared state.
//
// The cheapest eligible replica by score + rttWeight·rtt/1ms wins. Replicas
// within tieScore of it tie; among those, the ones within tieRTTMs of the
// nearest remain, and rnd picks one of them, so equal replicas share the load.
// A replica never measured counts rtt 0, so each gets tried and measured;
// so does one whose last reply is older than rttMaxAge while nothing is in
// flight to it (one probe at a time): one slow round trip must not keep a
// replica unchosen, and so unmeasured, for good.
func chooseReplica(in *pickInput) int {
	type cand struct {
		i         int
		cost, rtt float64
	}
	var buf [8]cand
	cs := buf[:0]
	loads := in.loads
	if loads == nil {
		loads = emptyLoadView
	}
	best := math.Inf(1)
	for i := range in.refs {
		r := &in.refs[i]
		if r.peer == nil || (i < 64 && in.skip&(1<<uint(i)) != 0) || r.peer.excluded(in.now, in.stallAfter) {
			continue
		}
		if i < len(in.stale) && in.stale[i].applies(in.now, in.bound) {
			continue
		}
		rtt := float64(r.peer.rtt.Load()) / float64(time.Millisecond)
		if last := r.peer.lastReply.Load(); in.rttMaxAge > 0 && last != 0 && in.now-last > in.rttMaxAge && r.peer.inflight.Load() == 0 {
			rtt = 0 // one probe at a time: the rest wait for its answer
		}
		cost := loads.score(r.id) + in.rttWeight*rtt
		cs = append(cs, cand{i, cost, rtt})
		best = min(best, cost)
	}
	if len(cs) == 0 {
		return -1
	}
	nearest := math.Inf(1)
	for _, c := range cs {
		if c.cost <= best+tieScore {
			nearest = min(nearest, c.rtt)
		}
	}
	n := 0
	for _, c := range cs {
		if c.cost <= best+tieScore && c.rtt <= nearest+tieRTTMs {
			cs[n] = c
			n++
		}
	}
	// Lemire's multiply-shift: a uniform index without a division.
	return cs[((in.rnd>>32)*uint64(n))>>32].i
}
