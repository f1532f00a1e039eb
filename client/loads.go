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
	dense    []nodeScore          // by node id, for small ids (the common case)
	sparse   map[uint64]nodeScore // larger ids
	fallback nodeScore            // any node without a fresh score
	fresh    int                  // how many scores were fresh
}

// nodeScore is a node's smoothed score and how much its samples stray from
// it (scoreTrack).
type nodeScore struct {
	score, noise float64
}

// maxDenseID bounds the dense table; node ids are allocated from 1 upwards.
const maxDenseID = 4096

// maxScore keeps an infinite or absurd score finite so that cost arithmetic
// still orders such nodes.
const maxScore = 1e9

var emptyLoadView = &loadView{}

func (v *loadView) score(id uint64) nodeScore {
	if id < uint64(len(v.dense)) {
		return v.dense[id]
	}
	if s, ok := v.sparse[id]; ok {
		return s
	}
	return v.fallback
}

// scoreTrack smooths one node's polled scores. A node's score is sampled
// once a second and, with a small admission limit, swings between idle and
// saturated with whatever happened to be in flight at that instant; taken
// raw, one such sample moved all of a node's reads to the others until the
// next one. The mean moves scoreGain of the way to each new sample, and
// noise, the mean absolute deviation from it, noiseGain of the way (TCP's
// smoothed round trip and its variation, RFC 6298). A first sample has no
// noise: nothing is known of its spread yet.
type scoreTrack struct {
	mean, noise float64
	last        float64 // the newest sample's score
	at          int64   // unix ns of the newest sample
}

// scoreFilter holds the poller's scoreTrack per node; only the poller
// goroutine touches it.
type scoreFilter map[uint64]*scoreTrack

// add folds l into its node's track. A sample no newer than the track's
// is one already seen (nodes relay each other's). A newer one with the
// same score only renews the track: a node stamps its load when it sends
// it, several times a second, but its score changes with its monitor's
// sample, once a second, and counting each copy would weigh a sample by
// how often it was sent. NaN scores are dropped; negative ones count as 0,
// infinite ones as maxScore.
func (f scoreFilter) add(l *tidekvpb.NodeLoad) {
	id, s, at := l.GetNodeId(), l.GetScore(), l.GetUnixNanos()
	if id == 0 || math.IsNaN(s) {
		return
	}
	s = min(max(s, 0), maxScore)
	t := f[id]
	switch {
	case t == nil:
		f[id] = &scoreTrack{mean: s, last: s, at: at}
	case at <= t.at:
	case s == t.last:
		t.at = at
	default:
		t.noise += noiseGain * (math.Abs(s-t.mean) - t.noise)
		t.mean += scoreGain * (s - t.mean)
		t.last, t.at = s, at
	}
}

// buildLoadView turns the tracks into a loadView as of now. A track whose
// newest sample is older than maxAge is stale: such nodes, and nodes never
// heard of, get the median of the fresh scores and noises (0 if none), so
// that an unknown node is neither shunned nor preferred.
func buildLoadView(f scoreFilter, now time.Time, maxAge time.Duration) *loadView {
	oldest := now.Add(-maxAge).UnixNano()
	fresh := make(map[uint64]nodeScore, len(f))
	scores := make([]float64, 0, len(f))
	noises := make([]float64, 0, len(f))
	var maxID uint64
	for id, t := range f {
		if t.at < oldest {
			continue
		}
		fresh[id] = nodeScore{score: t.mean, noise: t.noise}
		scores = append(scores, t.mean)
		noises = append(noises, t.noise)
		if id < maxDenseID {
			maxID = max(maxID, id)
		}
	}
	v := &loadView{fallback: nodeScore{score: median(scores), noise: median(noises)}, fresh: len(fresh)}
	if len(fresh) == 0 {
		return v
	}
	v.dense = make([]nodeScore, maxID+1)
	for i := range v.dense {
		v.dense[i] = v.fallback
	}
	for id, s := range fresh {
		if id < maxDenseID {
			v.dense[id] = s
		} else {
			if v.sparse == nil {
				v.sparse = map[uint64]nodeScore{}
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
	samples := scoreFilter{}
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
// penalised nodes while others remain, and folds the samples it gets into
// samples.
func (c *Client) pollOnce(samples scoreFilter, turn int) {
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
				samples.add(l)
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
