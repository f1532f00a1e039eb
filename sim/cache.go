package sim

import (
	"fmt"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/units"
)

// CacheSpec makes the simulated key space a cache key space: each node
// may hold CapacityPerNode bytes of it; a node above that evicts down to
// the capacity at once (the server's eviction, without its rate limit).
// Grow is the key space's on-full setting: grow asks the overflow policy
// to add nodes and shed data before nodes fill; otherwise nothing but
// eviction acts.
type CacheSpec struct {
	Name            string
	CapacityPerNode uint64
	Grow            bool
}

// CacheMetrics are what a cache key space went through: how long its
// nodes sat at capacity (requests that would have waited for a new node,
// the seed paper's idle time), what they evicted, and when nodes joined.
type CacheMetrics struct {
	// FullNodeSeconds sums, over nodes, the seconds each held the key
	// space at its capacity.
	FullNodeSeconds float64
	// EvictedBytes is what nodes at capacity dropped.
	EvictedBytes float64
	// FirstFull is when a node first reached its capacity (−1: never).
	FirstFull time.Duration
	// Joined is when each node the actuator started joined.
	Joined []time.Duration
	// Nodes is the serving nodes at the end; NodeSeconds sums serving
	// nodes × seconds (what starting nodes early costs).
	Nodes       int
	NodeSeconds float64
}

func (m CacheMetrics) String() string {
	first := "never"
	if m.FirstFull >= 0 {
		first = fmtDur(m.FirstFull)
	}
	joined := make([]string, len(m.Joined))
	for i, j := range m.Joined {
		joined[i] = fmtDur(j)
	}
	return fmt.Sprintf("full-node-seconds=%.0f evicted=%s first-full=%s joined=%v nodes=%d node-seconds=%.0f",
		m.FullNodeSeconds, units.Human(uint64(m.EvictedBytes)), first, joined, m.Nodes, m.NodeSeconds)
}

// cacheState is a cache key space's model and what it went through.
type cacheState struct {
	spec    CacheSpec
	metrics CacheMetrics
}

// EnableCache makes the key space a cache key space from now on.
func (s *Sim) EnableCache(c CacheSpec) error {
	if c.CapacityPerNode == 0 {
		return fmt.Errorf("sim: a cache key space needs a capacity per node")
	}
	s.cache = &cacheState{spec: c, metrics: CacheMetrics{FirstFull: -1}}
	return nil
}

// CacheMetrics are the cache key space's metrics so far (zero without one).
func (s *Sim) CacheMetrics() CacheMetrics {
	if s.cache == nil {
		return CacheMetrics{}
	}
	m := s.cache.metrics
	m.Joined = append([]time.Duration(nil), m.Joined...)
	for _, n := range s.nodes {
		if n.up() {
			m.Nodes++
		}
	}
	return m
}

// evict brings every node over the capacity back to it, shrinking each of
// its ranges in proportion (a range on several full nodes shrinks by the
// fullest one's share: a replicated delete removes the key from all of
// them), and counts the time nodes spend full.
func (s *Sim) evict(dt time.Duration) {
	if s.cache == nil {
		return
	}
	c := float64(s.cache.spec.CapacityPerNode)
	m := &s.cache.metrics
	keep := map[uint64]float64{}
	for _, n := range s.nodes {
		if n.up() {
			m.NodeSeconds += dt.Seconds()
		}
		if !n.up() || n.bytes < c {
			continue
		}
		keep[n.id] = c / n.bytes
		m.FullNodeSeconds += dt.Seconds()
		if m.FirstFull < 0 {
			m.FirstFull = s.clock.Elapsed()
			s.logf("n%d reached the cache key space's capacity of %s", n.id, units.Human(s.cache.spec.CapacityPerNode))
		}
	}
	if len(keep) == 0 {
		return
	}
	for _, r := range s.ranges {
		f := 1.0
		for _, rep := range r.replicas {
			if k, ok := keep[rep.Node]; ok {
				f = min(f, k)
			}
		}
		m.EvictedBytes += r.bytes * (1 - f)
		r.bytes *= f
	}
	s.computeLoads()
}

// observeCache adds the cache key space, spanning all keys, to obs.
func (s *Sim) observeCache(obs *control.Observation) {
	if s.cache == nil {
		return
	}
	obs.Caches = []control.CacheSpace{{Name: s.cache.spec.Name, CapacityPerNode: s.cache.spec.CapacityPerNode, Grow: s.cache.spec.Grow}}
}
