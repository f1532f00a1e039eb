package client

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestReadDelayWindow(t *testing.T) {
	const ms = int64(time.Millisecond)
	p := peerStats{delayTarget: 10 * ms, rttHalfLife: int64(time.Second)}
	p.inflight.Store(40)
	now := int64(time.Hour)
	reply := func(rtt int64) {
		now += ms
		p.observe(now-rtt, now)
		p.queued(now-rtt, now)
	}
	p.firstReply.Store(1) // replied long ago: every round trip counts
	for range 10 {
		reply(ms) // the base: 1 ms
	}
	reply(8 * ms)
	reply(200 * ms) // one slow reply: the average moves, not past 11 ms
	if _, refused := p.throttled(); refused {
		t.Fatalf("one slow reply cut the window (average %v)", time.Duration(p.rtt.Load()))
	}
	for range 30 {
		reply(60 * ms) // a queue: the average climbs past base + target
	}
	hint, refused := p.throttled()
	w := math.Float64frombits(p.window.Load())
	if !refused || w < 40*maxDelayCut || w >= 40 || hint <= 0 {
		t.Fatalf("after lasting 60 ms replies over a 1 ms base: window %v refused=%v hint %v, want cut, by at most half of 40", w, refused, hint)
	}
	if !p.shedding.Load() {
		t.Fatal("a delay cut does not steer relaxed reads away")
	}

	// The base forgets a quicker path within two buckets: round trips of
	// 30 ms for 12 s become the base, and 35 ms is then no excess.
	q := peerStats{delayTarget: 10 * ms, rttHalfLife: int64(time.Second)}
	now = int64(time.Hour)
	q.inflight.Store(40)
	q.firstReply.Store(1)
	q.noteBase(ms, now)
	for i := range 13 {
		at := now + int64(i+1)*int64(time.Second)
		q.observe(at-30*ms, at)
		q.queued(at-30*ms, at)
	}
	q.window.Store(0)
	at := now + 14*int64(time.Second)
	q.observe(at-35*ms, at)
	q.queued(at-35*ms, at)
	if _, refused := q.throttled(); refused {
		t.Fatal("a 35 ms round trip cut the window over a 30 ms base")
	}
	if base := q.noteBase(30*ms, at); base != 30*ms {
		t.Fatalf("base %v after 13 s of 30 ms round trips, want 30ms", time.Duration(base))
	}

	for method, want := range map[string]bool{"/tidekv.KV/Get": true, "/tidekv.KV/BatchGet": true,
		"/tidekv.KV/Put": false, "/tidekv.KV/Scan": false, "/tidekv.Admin/NodeLoads": false} {
		if delayMeasured(method) != want {
			t.Errorf("delayMeasured(%s) = %v, want %v", method, !want, want)
		}
	}
}

// A node that reads one key at a time, 2 ms each, offered 64 concurrent
// readers: without the delay window every reader waits in front of it
// (about 128 ms a read); with it the client keeps a few reads in flight and
// refuses the rest at once.
func TestReadDelayWindowBoundsQueue(t *testing.T) {
	run := func(target time.Duration) (maxQueue int32, refused int64) {
		c := newFakeCluster(t, 1)
		c.setRanges(rng(1, "", "", 1, 1))
		var (
			serve   sync.Mutex
			waiting atomic.Int32
			measure atomic.Bool
			peak    atomic.Int32
		)
		c.node(1).setHook(func(ctx context.Context, method string, key []byte) error {
			if method != "Get" {
				return nil
			}
			if n := waiting.Add(1); measure.Load() && n > peak.Load() {
				peak.Store(n)
			}
			serve.Lock()
			waiting.Add(-1)
			time.Sleep(2 * time.Millisecond)
			serve.Unlock()
			return nil
		})
		cl := c.newClient(func(cfg *Config) { cfg.FailFastOnOverload, cfg.ReadDelayTarget = true, target })
		mustPut(t, cl, "k", "v")
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		time.AfterFunc(800*time.Millisecond, func() { measure.Store(true) })
		var wg sync.WaitGroup
		var overloaded atomic.Int64
		for range 64 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if _, err := cl.Get(ctx, []byte("k")); errors.Is(err, ErrOverloaded) {
						overloaded.Add(1)
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		return peak.Load(), overloaded.Load()
	}
	if q, _ := run(time.Hour); q < 40 {
		t.Fatalf("without the window at most %d reads waited at the node, want most of the 64 readers (the test's load is too light)", q)
	}
	q, refused := run(10 * time.Millisecond)
	t.Logf("with window: queue %d refused %d", q, refused)
	if q > 16 || refused == 0 {
		t.Fatalf("with a 10 ms target %d reads waited at the node (want at most 16) and %d were refused in the client (want some)", q, refused)
	}
}
