package client

import (
	"sync/atomic"
	"time"
)

// The window of requests in flight to a node (peerStats.window) also closes
// on the client's own measure of queueing. Beyond what a node can read, the
// excess reads wait in front of it (socket buffers, HTTP/2 streams), where the
// node cannot see them and, since refusing a cached read costs it as much as
// serving one, would gain nothing by refusing them. The client sees the wait
// in its round trips: a point read that took longer than the node's quickest
// recent one plus the target waited in a queue, so the window is cut, as TCP
// Vegas cuts its congestion window on a growing round trip, to the requests
// in flight times the share of the round trip that is not excess queueing.
// Requests over the window are refused in the client at once, which bounds
// the queue, and with it the latency of the reads that are sent.

// baseBucket is how long one bucket of the quickest round trip lasts; the
// base is the quicker of the current and the previous bucket's, so it
// forgets a faster path within two buckets and is never taken from the
// samples of one burst alone.
const baseBucket = int64(5 * time.Second)

// delayMeasured reports whether method's round trips measure queueing: the
// point reads, whose work at the node is small and alike. Scans take as
// long as their data, and writes as long as their Raft commit and the
// node's own admission, which refuses them, already bounds them.
func delayMeasured(method string) bool {
	return method == "/tidekv.KV/Get" || method == "/tidekv.KV/BatchGet"
}

// noteBase folds a round trip into the quickest of the recent ones and
// returns that base.
func (p *peerStats) noteBase(sample, now int64) int64 {
	p.base.note(sample, now, baseBucket)
	return p.base.get()
}

// windowMin keeps the quickest of the round trips of the current and the
// previous bucket (a bucket starts with the first sample after the last
// one ended). Updates are compare-and-swap; one lost to a concurrent reply
// only leaves the minimum a sample older.
type windowMin struct {
	cur, prev, rot atomic.Int64
}

func (w *windowMin) note(sample, now, bucket int64) {
	if rot := w.rot.Load(); now-rot >= bucket && w.rot.CompareAndSwap(rot, now) {
		w.prev.Store(w.cur.Swap(sample))
		return
	}
	for {
		cur := w.cur.Load()
		if (cur != 0 && cur <= sample) || w.cur.CompareAndSwap(cur, sample) {
			return
		}
	}
}

// get is the minimum, 0 before any sample.
func (w *windowMin) get() int64 {
	m := w.cur.Load()
	if prev := w.prev.Load(); prev > 0 && (m == 0 || prev < m) {
		m = prev
	}
	return m
}

// maxDelayCut is the most one cut takes off the window: a round trip that
// looks a hundred times the base (the client's own process stalled, a
// collection) must not leave the window at a few requests, from which
// it grows back by one a round trip.
const maxDelayCut = 0.5

// queued checks a point read's round trip for queueing beyond the target
// and cuts the window when it finds some. It judges the moving average
// (peerStats.observe), not the sample: one slow reply is noise, a queue
// lasts. The cut marks the node as shedding, so replica choice also steers
// relaxed reads away from it while its window is full.
func (p *peerStats) queued(sent, now int64) {
	if p.delayTarget <= 0 {
		return // off: nothing to keep on the read path
	}
	base := p.noteBase(max(now-sent, 1), now)
	avg := p.rtt.Load()
	excess := avg - base - p.delayTarget
	if excess <= 0 {
		return
	}
	p.cut(now, max(maxDelayCut, float64(base+p.delayTarget)/float64(avg)), time.Duration(excess))
	p.shedding.Store(true)
}
