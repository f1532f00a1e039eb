package raftstore

import (
	"testing"
	"time"
)

// The lease clock (the boot-time clock on Linux) never reads 0 ("never")
// and runs at the rate of Go's monotonic clock while the machine is awake:
// an interval it measures lies within the intervals Go measures around it.
func TestMonoNowRunsWithTheMonotonicClock(t *testing.T) {
	t0 := time.Now()
	a := monoNow()
	t1 := time.Now()
	time.Sleep(20 * time.Millisecond)
	t2 := time.Now()
	b := monoNow()
	t3 := time.Now()
	if a <= 0 {
		t.Fatalf("first reading %d, want > 0", a)
	}
	d := time.Duration(b - a)
	if slack := time.Microsecond; d < t2.Sub(t1)-slack || d > t3.Sub(t0)+slack {
		t.Fatalf("lease clock measured %v between readings Go measured as %v to %v", d, t2.Sub(t1), t3.Sub(t0))
	}
}
