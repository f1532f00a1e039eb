package client

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

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
// the known nodes: any node knows every node's load, and rotating spreads
// the polls. The view is rebuilt even when a poll fails, so that scores age
// into staleness. Every rangeRefreshEvery polls it also reloads the range
// map: replicas placement adds (adaptive learners for hot ranges) cause no
// routing error, and nodes older than range_generation in read answers do
// not tell of them either. With the default 500 ms poll, the range map of a
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
