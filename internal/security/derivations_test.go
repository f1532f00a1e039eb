package security

import (
	"testing"
	"time"
)

// Derivations keep at most half the node's CPUs busy: on one CPU a slot
// rests as long as each derivation took, on half a CPU three times as
// long; with two CPUs or more the max(1, floor(CPUs/2)) slots need no
// rest, one on three CPUs included.
func TestDerivationRest(t *testing.T) {
	for _, c := range []struct {
		cpus  float64
		slots int
		want  time.Duration
	}{
		{1, 1, 30 * time.Millisecond},
		{0.5, 1, 90 * time.Millisecond},
		{1.5, 1, 10 * time.Millisecond},
		{2, 1, 0},
		{3, 1, 0},
		{8, 4, 0},
	} {
		if got := restAfter(30*time.Millisecond, c.cpus, c.slots); got != c.want {
			t.Errorf("restAfter(30ms, %g CPUs, slots %d) = %v, want %v", c.cpus, c.slots, got, c.want)
		}
	}
}

// On a node of one CPU's quota (and two Ps, as the Go runtime gives it)
// the next derivation waits out the rest of the last one.
func TestDerivationGateRestsOnOneCPU(t *testing.T) {
	g := newDerivationGate()
	g.procs = func() int { return 2 }
	g.quota = func() float64 { return 1 }
	const took = 40 * time.Millisecond
	start := time.Now()
	g.do(func() { time.Sleep(took) })
	first := time.Since(start)
	g.do(func() {})
	if second := time.Since(start) - first; second < took {
		t.Errorf("the second derivation started %v after the first ended, want at least %v", second, took)
	}
}
