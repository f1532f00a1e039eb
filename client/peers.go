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
	if now-p.cutAt.Load() < max(p.rtt.Load(), int64(10*time.Millisecond)) {
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
