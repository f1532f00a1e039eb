package monitor

import (
	"math"
	"sync/atomic"
	"time"
)

// ServiceTimeAlpha is the weight of each new observation in ServiceTimer's
// moving average: mean ← mean + α·(d − mean). With α = 1/16 the mean
// reflects roughly the last 16 requests (an observation's weight halves
// after ~11 more), so a single stalled request moves the mean by at most a
// sixteenth of its excess while a sustained slow-down shows within a few
// dozen requests. TCP's smoothed RTT uses 1/8; request latencies are more
// heavy-tailed than packet RTTs, hence the smaller value.
const ServiceTimeAlpha = 1.0 / 16

// ServiceTimer keeps an exponentially weighted moving average of request
// service times. It is lock-free (one CAS per Observe) and its zero value is
// ready to use; it must not be copied after first use.
type ServiceTimer struct {
	// bits holds math.Float64bits of the mean in nanoseconds; 0 means no
	// observation yet. Observe records at least 1 ns so a real mean is
	// never 0.
	bits atomic.Uint64
	// observed: an observation arrived since the last Sample.
	observed atomic.Bool
}

// Observe records one request's service time. The first observation sets
// the mean directly, so the average does not have to climb from 0.
func (t *ServiceTimer) Observe(d time.Duration) {
	if !t.observed.Load() { // a read: no write per request once set
		t.observed.Store(true)
	}
	x := float64(max(d, 1))
	for {
		old := t.bits.Load()
		next := x
		if old != 0 {
			m := math.Float64frombits(old)
			next = m + ServiceTimeAlpha*(x-m)
		}
		if t.bits.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// Mean returns the current average, 0 before the first observation.
func (t *ServiceTimer) Mean() time.Duration {
	return time.Duration(math.Float64frombits(t.bits.Load()))
}

// Sample returns the mean for one monitor sample, halving it first when no
// request was served since the previous sample: a node that clients avoid
// because its mean was high would otherwise keep that mean, and its score,
// for ever (no request, no new observation), and never be chosen again.
func (t *ServiceTimer) Sample() time.Duration {
	if !t.observed.Swap(false) {
		for {
			old := t.bits.Load()
			half := math.Float64frombits(old) / 2
			if old == 0 || half < 1 || t.bits.CompareAndSwap(old, math.Float64bits(half)) {
				break
			}
		}
	}
	return t.Mean()
}
