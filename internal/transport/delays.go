package transport

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Delays is a table of emulated one-way network latency per ordered
// (from node, to node) pair, for tests and benchmarks that emulate
// geo-distributed localities. Each value is the time a message from
// `from` spends on the wire before `to` sees it; a round trip between two
// nodes is Get(a, b) + Get(b, a). Pairs not set have no delay.
//
// Delays is safe for concurrent use; changes apply to messages sent after
// them (messages already on the wire keep their delay). Reads are one
// atomic load and a map lookup, because every Send reads it: writers copy
// the table and swap it in. The zero value is an empty table; a nil
// *Delays reads as all zero. It must not be copied after first use.
type Delays struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[[2]uint64]time.Duration]
	// clock times delayed messages; nil is the process's monotonic clock.
	// A test sets a manual one before its first delay, to see when a
	// message is delivered without racing the scheduler.
	clock delayClock
}

// delayClock times delayed messages: now is nanoseconds on a monotonic
// scale; waitUntil blocks until now() >= due or stop closes (false),
// reusing *timer if it needs one.
type delayClock interface {
	now() int64
	waitUntil(timer **time.Timer, due int64, stop <-chan struct{}) bool
}

// monoClock is the process's monotonic clock (monoNow, waitUntil).
type monoClock struct{}

func (monoClock) now() int64 { return monoNow() }

func (monoClock) waitUntil(timer **time.Timer, due int64, stop <-chan struct{}) bool {
	return waitUntil(timer, due, stop)
}

// clockOf is d's clock; a nil table's is the monotonic clock.
func (d *Delays) clockOf() delayClock {
	if d == nil || d.clock == nil {
		return monoClock{}
	}
	return d.clock
}

// Get returns the one-way delay from one node to another (0 if unset or if
// d is nil).
func (d *Delays) Get(from, to uint64) time.Duration {
	if d == nil {
		return 0
	}
	m := d.m.Load()
	if m == nil || len(*m) == 0 {
		return 0
	}
	return (*m)[[2]uint64{from, to}]
}

// Set sets the one-way delay from one node to another; delay <= 0 removes
// it.
func (d *Delays) Set(from, to uint64, delay time.Duration) {
	d.update(false, func(m map[[2]uint64]time.Duration) { put(m, from, to, delay) })
}

// SetSymmetric sets the one-way delay in both directions between a and b,
// so their round trip is 2*delay.
func (d *Delays) SetSymmetric(a, b uint64, delay time.Duration) {
	d.update(false, func(m map[[2]uint64]time.Duration) {
		put(m, a, b, delay)
		put(m, b, a, delay)
	})
}

// SetLocalities replaces the whole table from a placement of nodes in
// localities: between nodes a and b (a != b) the one-way delay is
// rtt(locality(a), locality(b)) / 2. rtt is called for pairs in the same
// locality too, so it can model intra-locality latency (return 0 for none).
// Nodes absent from localities get no delay; later Set calls override
// single pairs.
func (d *Delays) SetLocalities(localities map[uint64]string, rtt func(a, b string) time.Duration) {
	d.update(true, func(m map[[2]uint64]time.Duration) {
		for a, la := range localities {
			for b, lb := range localities {
				if a != b {
					put(m, a, b, rtt(la, lb)/2)
				}
			}
		}
	})
}

// Clear removes every delay.
func (d *Delays) Clear() { d.update(true, func(map[[2]uint64]time.Duration) {}) }

// UniformRTT is an rtt function for SetLocalities: round trip r between
// different localities, none within one.
func UniformRTT(r time.Duration) func(a, b string) time.Duration {
	return func(a, b string) time.Duration {
		if a == b {
			return 0
		}
		return r
	}
}

func put(m map[[2]uint64]time.Duration, from, to uint64, delay time.Duration) {
	if delay > 0 {
		m[[2]uint64{from, to}] = delay
	} else {
		delete(m, [2]uint64{from, to})
	}
}

// update applies f to a copy of the table (an empty one if replace) and
// publishes it; readers never see a map that is being written.
func (d *Delays) update(replace bool, f func(map[[2]uint64]time.Duration)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := map[[2]uint64]time.Duration{}
	if old := d.m.Load(); old != nil && !replace {
		m = maps.Clone(*old)
	}
	f(m)
	d.m.Store(&m)
}

// epoch anchors monoNow; time.Since reads the monotonic clock, so due
// times are immune to wall-clock steps.
var epoch = time.Now()

// monoNow is nanoseconds since epoch, used for due times of delayed
// messages (0 means "not delayed", which monoNow()+d for d > 0 never is).
func monoNow() int64 { return int64(time.Since(epoch)) }

// dueTime stamps a message about to be sent from→to: 0 when there is no
// delay (no clock read), else when it may be delivered.
func (d *Delays) dueTime(from, to uint64) int64 {
	if delay := d.Get(from, to); delay > 0 {
		return d.clockOf().now() + int64(delay)
	}
	return 0
}

// waitUntil blocks until monoNow() >= due or stop closes (false). The timer
// is created on first use and reused, so undelayed traffic never makes one.
func waitUntil(timer **time.Timer, due int64, stop <-chan struct{}) bool {
	wait := time.Duration(due - monoNow())
	if wait <= 0 {
		return true
	}
	if *timer == nil {
		*timer = time.NewTimer(wait)
	} else {
		// Since Go 1.23 Reset also discards a stale expiry.
		(*timer).Reset(wait)
	}
	select {
	case <-stop:
		return false
	case <-(*timer).C:
		return true
	}
}

// sleepCtx waits out the delay from→to on d's clock, or until ctx is done.
func (d *Delays) sleepCtx(ctx context.Context, from, to uint64) error {
	delay := d.Get(from, to)
	if delay <= 0 {
		return nil
	}
	clk := d.clockOf()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	if !clk.waitUntil(&timer, clk.now()+int64(delay), ctx.Done()) {
		return ctx.Err()
	}
	return nil
}
