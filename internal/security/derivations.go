package security

import (
	"runtime"
	"sync"
	"time"
)

// derivationGate keeps password derivations to half the node's cores:
// each takes argon2MemoryKB of memory and a core for tens of
// milliseconds, and the requests of users already logged in (checked
// against the cache) must keep the other half. On a node of two cores or
// more that is max(1, cores/2) derivations at once. On a node of one core
// one derivation at a time would take all of it, so its slot stays taken,
// after each derivation, for as long again: half the core over time.
type derivationGate struct {
	// procs is the node's cores, read at every derivation: a node sized
	// by a cgroup quota has its runtime lower GOMAXPROCS after it starts.
	procs func() int

	mu   sync.Mutex
	cond sync.Cond
	busy int
}

func newDerivationGate() *derivationGate {
	g := &derivationGate{procs: func() int { return runtime.GOMAXPROCS(0) }}
	g.cond.L = &g.mu
	return g
}

// do runs derive once a slot is free. It times the derivation on the
// wall clock (not a directory's injected one): the time is the core's.
func (g *derivationGate) do(derive func()) {
	procs := g.procs()
	slots := max(1, procs/2)
	g.mu.Lock()
	for g.busy >= slots {
		g.cond.Wait()
	}
	g.busy++
	g.mu.Unlock()
	start := time.Now()
	derive()
	release := func() {
		g.mu.Lock()
		g.busy--
		g.mu.Unlock()
		g.cond.Signal()
	}
	if rest := restAfter(time.Since(start), procs, slots); rest > 0 {
		// The caller has its answer; only the next derivation waits.
		time.AfterFunc(rest, release)
		return
	}
	release()
}

// restAfter is how long a slot stays taken after a derivation that took
// spent, so that slots of them keep at most half of procs cores busy.
func restAfter(spent time.Duration, procs, slots int) time.Duration {
	duty := min(1, float64(procs)/2/float64(slots))
	return time.Duration(float64(spent) * (1/duty - 1))
}
