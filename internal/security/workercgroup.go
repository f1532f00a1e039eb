package security

import (
	"log"

	"github.com/tidekv/tidekv/internal/cgroup"
)

// A sized node (a cgroup v1 cpu cgroup of its own, which it may write)
// puts its derivation workers in a child of that cgroup with a quota of
// their own: the derivation budget in CPUs, at least the kernel's minimum
// (cgroup.MinCPUs). A worker in the node's cgroup spent the node's quota:
// while it derived on one core and requests ran on the other, the cgroup
// used its quota early in the period and the kernel stopped all of it,
// requests included, for the rest (141-174 throttled periods a flood
// window in `tidekv bench scenario loginflood`, 0-4 with the child;
// docs/benchmarks/security.md). A child's time still counts in its
// parent's usage, but the child is throttled at its own quota, so
// derivations take at most the budget's CPU: the kernel enforces the
// budget too.
//
// Anywhere else (tests, unsized nodes, not root, cgroup v2) workers stay
// in the node's cgroup, as before.

// workerCgroupName is the child cgroup's name.
const workerCgroupName = "derive"

// workerCgroup makes the workers' cgroup with a quota of cpus CPUs (at
// least cgroup.MinCPUs) and
// returns what adds a process to it and what removes it; an error where
// the node has no cgroup of its own to make it in.
type workerCgroup func(cpus float64) (add func(pid int) error, remove func() error, err error)

// ownCgroupChild makes the workers' cgroup as a child of the node's own.
func ownCgroupChild(cpus float64) (func(int) error, func() error, error) {
	c, err := cgroup.Own()
	if err != nil {
		return nil, nil, err
	}
	g, err := c.CreateChild(workerCgroupName, cpus)
	if err != nil {
		return nil, nil, err
	}
	return g.Add, g.Remove, nil
}

// place moves a new worker into the workers' cgroup, making it first if
// no worker was placed since the pool started or stopped. Where it cannot
// be made, that is said once, as a debug line, and workers stay in the
// node's cgroup.
func (p *workerPool) place(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.placed {
		p.placed = true
		add, remove, err := p.cgroup(max(cgroup.MinCPUs, p.cores()))
		if err != nil {
			log.Printf("security: debug: derivation workers stay in the node's cgroup: %v", err)
			return
		}
		p.add, p.remove = add, remove
	}
	if p.add == nil {
		return
	}
	if err := p.add(pid); err != nil {
		log.Printf("security: derivation worker %d stays in the node's cgroup: %v", pid, err)
	}
}
