package security

import (
	"testing"
	"time"
)

// Derivations keep at most half the node's cores busy: on one core a slot
// rests as long as each derivation took; with two cores or more the
// max(1, cores/2) slots need no rest, one on three cores included.
func TestDerivationRest(t *testing.T) {
	for _, c := range []struct {
		procs, slots int
		want         time.Duration
	}{
		{1, 1, 30 * time.Millisecond},
		{2, 1, 0},
		{3, 1, 0},
		{8, 4, 0},
	} {
		if got := restAfter(30*time.Millisecond, c.procs, c.slots); got != c.want {
			t.Errorf("restAfter(30ms, procs %d, slots %d) = %v, want %v", c.procs, c.slots, got, c.want)
		}
	}
}

// On one core the next derivation waits out the rest of the last one.
func TestDerivationGateRestsOnOneCore(t *testing.T) {
	g := newDerivationGate()
	g.procs = func() int { return 1 }
	const took = 40 * time.Millisecond
	start := time.Now()
	g.do(func() { time.Sleep(took) })
	first := time.Since(start)
	g.do(func() {})
	if second := time.Since(start) - first; second < took {
		t.Errorf("the second derivation started %v after the first ended, want at least %v", second, took)
	}
}
