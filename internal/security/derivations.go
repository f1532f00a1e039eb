package security

import (
	"runtime"
	"sync"
	"time"
)

// derivationGate keeps password derivations to half the node's CPUs:
// each takes argon2MemoryKB of memory and a core for tens of
// milliseconds, and the requests of users already logged in (checked
// against the cache) must keep the other half. A node of C CPUs derives
// max(1, floor(C/2)) hashes at once; where that is more than half of C (a
// node of less than two CPUs, or three), each slot stays taken after its
// derivation for long enough that the slots are busy C/2 of the time: on
// one CPU, as long again as the derivation took.
//
// The node's CPUs are the fewer of GOMAXPROCS and its cgroup's quota:
// the Go runtime gives a node of one CPU's quota two Ps, and without the
// rest one derivation would keep that node's whole quota busy.
type derivationGate struct {
	// procs is GOMAXPROCS; quota the node's CPU quota (0: none). Both are
	// read at every derivation: a sized node is moved into its cgroup
	// after it starts.
	procs func() int
	quota func() float64

	mu   sync.Mutex
	cond sync.Cond
	busy int
}

func newDerivationGate() *derivationGate {
	g := &derivationGate{procs: func() int { return runtime.GOMAXPROCS(0) }, quota: func() float64 { return 0 }}
	g.cond.L = &g.mu
	return g
}

// do runs derive once a slot is free. It times the derivation on the
// wall clock (not a directory's injected one): the time is the core's.
func (g *derivationGate) do(derive func()) {
	cpus := float64(g.procs())
	if q := g.quota(); q > 0 && q < cpus {
		cpus = q
	}
	slots := max(1, int(cpus/2))
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
	if rest := restAfter(time.Since(start), cpus, slots); rest > 0 {
		// The caller has its answer; only the next derivation waits.
		time.AfterFunc(rest, release)
		return
	}
	release()
}

// restAfter is how long a slot stays taken after a derivation that took
// spent, so that slots of them keep at most half of cpus busy.
func restAfter(spent time.Duration, cpus float64, slots int) time.Duration {
	duty := min(1, cpus/2/float64(slots))
	return time.Duration(float64(spent) * (1/duty - 1)).Round(time.Microsecond)
}
