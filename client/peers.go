package client

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// monoEpoch anchors monoNow: a monotonic clock as an int64 that fits atomics.
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) }

// peerStats is what the client has observed of one node address. It is
// shared by every request and updated with atomics only.
type peerStats struct {
	rtt          atomic.Int64 // moving average round trip, ns; 0 until the first reply
	rttAt        atomic.Int64 // mono ns of the last round trip folded into rtt
	firstReply   atomic.Int64 // mono ns of the node's first KV reply; 0 until then
	rttHalfLife  int64        // readTuning.rttHalfLife, ns; set at creation
	inflight     atomic.Int32 // KV RPCs in flight
	lastSent     atomic.Int64 // mono ns of the last KV request sent
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
	// shedding: the node's last refusal said it admits less than all it
	// is sent (admit share below 1, or not given). Only then does the
	// window hold back relaxed reads (peerStats.usable).
	shedding atomic.Bool
	// delayTarget is Config.ReadDelayTarget in ns, set at creation; base
	// keeps the quickest recent point-read round trip (delaywindow.go).
	delayTarget int64
	base        windowMin
	// near is the quickest round trip of the last one to two nearBuckets:
	// how far the node is, for replica choice (choice.go). A pause at the
	// node slows every reply in flight and lifts the average (rtt) for a
	// while; the quickest recent reply still says how near it is.
	near windowMin
}

// nearBucket is the bucket of peerStats.near: a node whose every reply for
// one to two seconds was slow is that far.
const nearBucket = int64(time.Second)

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

// refusedFor is how long a node counts as refusing after its last refusal
// without a retry hint (refusedLately).
const refusedFor = 20 * time.Millisecond

// refusedLately reports whether the node refused a request as overloaded
// within its last retry hint (refusedFor without one).
func (p *peerStats) refusedLately(now int64) bool {
	at := p.cutAt.Load()
	return at != 0 && now-at < max(p.shareHint.Load(), int64(refusedFor))
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
	return p.over(p.inflight.Load() + 1)
}

// over reports whether n requests in flight exceed the window, with the
// node's last retry hint.
func (p *peerStats) over(n int32) (time.Duration, bool) {
	w := math.Float64frombits(p.window.Load())
	return time.Duration(p.shareHint.Load()), w > 0 && float64(n) > w
}

// windowedKey marks a request's context when the window applies to it; the
// interceptor then refuses it with windowFull if its place in the window
// is gone.
type windowedKey struct{}

// windowFull is the interceptor's refusal of a windowed request that found
// the window full: nothing was sent.
type windowFull struct{ hint time.Duration }

func (windowFull) Error() string { return "the window of requests in flight to the node is full" }

// observe folds a round trip, sent and answered at these mono times, into
// the average with weight 1/4: a lasting change wins within a few replies
// (three quarters of a hundredfold one within sixteen). A sample counts as
// at most 2× the average + 2 ms, so one slow reply (a pause, a scheduling
// hiccup) moves it by at most a quarter of the average + 0.5 ms, inside
// the noise band of replica choice: it cannot push the replica out of the
// choice by itself. The old average first ages toward the sample
// (rttHalfLife), so after a silence the fresh sample all but replaces it.
// Requests sent before the node's first reply are not measured (false). A
// single CAS keeps it wait-free; a sample lost to a concurrent update is
// harmless for an average.
func (p *peerStats) observe(sent, now int64) bool {
	if first := p.firstReply.Load(); first == 0 || sent < first {
		// Sent before the node first answered: it waited for the
		// connection and the stream to open, which says nothing about
		// the node.
		p.firstReply.CompareAndSwap(0, now)
		return false
	}
	sample := max(now-sent, 1) // 0 means "never measured"
	p.near.note(sample, now, nearBucket)
	old := p.rtt.Load()
	if old == 0 {
		// A lone sample is trusted as if already a half-life old: one
		// slow first reply does not keep the replica out for long.
		if p.rtt.CompareAndSwap(0, sample) {
			p.rttAt.Store(now - p.rttHalfLife)
		}
		return true
	}
	aged := decayToward(old, sample, now-p.rttAt.Load(), p.rttHalfLife)
	next := aged + (min(sample, 2*aged+int64(2*time.Millisecond))-aged)/4
	if p.rtt.CompareAndSwap(old, max(next, 1)) {
		p.rttAt.Store(now)
	}
	return true
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

// refused records an OVERLOADED answer; sent is false when the refusal
// was this client's own (its window was full), which says nothing new.
// The window narrows. A node that admits everything it is sent (admit
// share 1) refused only because its in-flight slots were full at that
// instant, which the next request may well not find: it stays in the
// choice, where its in-flight count and window already weigh, since
// leaving it out pushes its reads onto the other replicas, which then
// refuse in turn. A node shedding load (share below 1, or not given)
// asked for its retry hint (20 ms without one) and is left out for it.
func (p *peerStats) refused(now int64, d *tidekvpb.ErrorDetail, sent bool) {
	if !sent {
		return
	}
	hint := time.Duration(d.GetRetryAfterMs()) * time.Millisecond
	p.cut(now, d.GetAdmitShare(), hint)
	p.shedding.Store(d.GetAdmitShare() < 1)
	if d.GetAdmitShare() >= 1 {
		return
	}
	if hint <= 0 {
		hint = 20 * time.Millisecond
	}
	if until := now + int64(hint); until > p.penaltyUntil.Load() {
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

// usable reports whether replica choice may pick the peer: not penalised,
// and not busy with no reply for stallAfter (a hung node that has not
// failed anything yet). It also gives the peer's requests in flight and
// whether they fill its window while the node is shedding: a window cut
// by a node that admits everything (its in-flight slots were full) does not
// hold back relaxed reads, since a read refused by the client fails for
// sure and one sent may well find a slot.
func (p *peerStats) usable(now, stallAfter int64) (inflight int32, full, ok bool) {
	if now < p.penaltyUntil.Load() {
		return 0, false, false
	}
	inflight = p.inflight.Load()
	if inflight > 0 && now-p.lastProgress.Load() > stallAfter {
		return inflight, false, false
	}
	w := math.Float64frombits(p.window.Load())
	return inflight, w > 0 && float64(inflight) >= w && p.shedding.Load(), true
}

// Only KV requests are measured (round trips, requests in flight, stalls):
// admin operations can legitimately take seconds, and even load polls take
// another path through the node (a unary call where KV requests share a
// stream), so a node measured by polls alone looked farther than the ones
// read from, stayed unread, and so stayed measured by polls alone.
func measured(method string) bool { return strings.HasPrefix(method, "/tidekv.KV/") }

// interceptor measures round trips to addr and adds the emulated latency.
// The delays are inside the measurement, so emulated distance steers
// replica choice as real distance would.
func (p *peerStats) interceptor(addr string, latency func(string) time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var d time.Duration
		if latency != nil {
			d = latency(addr)
		}
		kv := measured(method)
		start := monoNow()
		if kv {
			n := p.inflight.Add(1)
			if hint, full := p.over(n); full && ctx.Value(windowedKey{}) != nil {
				p.inflight.Add(-1)
				return windowFull{hint}
			}
			if n == 1 {
				p.lastProgress.Store(start)
			}
			defer p.inflight.Add(-1)
			p.lastSent.Store(start)
		}
		if d > 0 && !sleep(ctx, d) {
			return status.FromContextError(ctx.Err()).Err()
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if d > 0 && !sleep(ctx, d) {
			// The reply is still "on the wire" when the deadline passes.
			return status.FromContextError(ctx.Err()).Err()
		}
		if kv && replied(err) {
			end := monoNow()
			measuredRTT := p.observe(start, end)
			p.lastReply.Store(end)
			p.lastProgress.Store(end)
			if err == nil {
				p.succeeded()
				p.widen()
				// Emulated latency is a sleep, whose oversleep on a
				// busy test machine is not a queue at the node.
				if measuredRTT && d == 0 && delayMeasured(method) {
					p.queued(start, end)
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
	p, _ := c.peers.LoadOrStore(addr, &peerStats{rttHalfLife: int64(c.tune.rttHalfLife), delayTarget: int64(c.cfg.ReadDelayTarget)})
	return p.(*peerStats)
}

// markDown records a failure of nc's node: suspect for leaseholder routing,
// penalised for replica choice.
func (c *Client) markDown(nc *nodeConn, atLeast time.Duration) {
	c.sus.mark(nc.addr)
	nc.peer.penalise(monoNow(), &c.tune, atLeast)
}
