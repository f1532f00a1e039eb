package cachebench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/elastic"
)

// Fig3Config is the miss-rate experiment's knobs. Time is in steps: a step
// is one second of virtual time in which Rate queries arrive evenly.
type Fig3Config struct {
	// Keys is how many distinct keys queries draw from, uniformly; a value
	// is ValueBytes bytes.
	Keys, ValueBytes int
	// Steps is the run's length; BucketSteps how many steps one reported
	// miss rate covers.
	Steps, BucketSteps int
	// Rates are the query rates compared, each a run of every variant
	// (queries per step).
	Rates []int
	// CapacityPerNode is the bytes of the key space one node may hold
	// (keys and values), the same for every variant.
	CapacityPerNode uint64
	// Ranges is how many ranges of equal hash width the key space starts
	// with, spread over the first nodes in order.
	Ranges int
	// StaticNodes are the static caches' sizes; they evict.
	StaticNodes []int
	// ElasticNodes is how many nodes the growing key space starts on;
	// MaxNodes caps it (it evicts there, as a grow-mode key space does).
	ElasticNodes, MaxNodes int
	// NodeStartSteps is how long a node asked for takes to join.
	NodeStartSteps int
	// OriginLatency is what a miss costs: the slow origin computing the
	// value, which the node then caches.
	OriginLatency time.Duration
	// Cache is the eviction knobs (LowWater, SampleKeys, MaxEvictKeys,
	// TrackedKeys); Overflow the growing key space's.
	Cache    cache.Config
	Overflow elastic.OverflowConfig
	Seed     uint64
}

// DefaultFig3Config is the paper's setting in miniature: 64K keys of 100
// bytes, 50 and 255 queries per step for 1000 steps, 512 KiB a node (about
// 4 200 keys, so the whole key space needs 16 nodes), 16 ranges, static
// caches of 2, 4 and 8 nodes against a key space growing from 2 nodes to at
// most 32, nodes that take 10 steps to join, an origin that takes 200 ms.
func DefaultFig3Config() Fig3Config {
	return Fig3Config{Keys: 64 << 10, ValueBytes: 100, Steps: 1000, BucketSteps: 50, Rates: []int{50, 255},
		CapacityPerNode: 512 << 10, Ranges: 16, StaticNodes: []int{2, 4, 8}, ElasticNodes: 2, MaxNodes: 32,
		NodeStartSteps: 10, OriginLatency: 200 * time.Millisecond,
		Cache: cache.DefaultConfig(), Overflow: elastic.DefaultOverflowConfig(), Seed: 1}
}

// Validate returns one sentence naming the first bad value, or nil.
func (c Fig3Config) Validate() error {
	switch {
	case c.Keys < 1 || c.ValueBytes < 0:
		return fmt.Errorf("fig3: need at least one key and a non-negative value size, got %d keys of %d bytes", c.Keys, c.ValueBytes)
	case c.Steps < 1 || c.BucketSteps < 1 || c.BucketSteps > c.Steps:
		return fmt.Errorf("fig3: need at least one step and 1 to %d steps a bucket, got %d and %d", c.Steps, c.Steps, c.BucketSteps)
	case len(c.Rates) == 0:
		return fmt.Errorf("fig3: no query rate")
	case c.CapacityPerNode == 0:
		return fmt.Errorf("fig3: the capacity per node must be positive")
	case c.Ranges < 1 || c.ElasticNodes < 1 || c.ElasticNodes > c.Ranges || c.MaxNodes < c.ElasticNodes:
		return fmt.Errorf("fig3: need 1 ≤ elastic start nodes (%d) ≤ ranges (%d) and ≤ max nodes (%d)", c.ElasticNodes, c.Ranges, c.MaxNodes)
	case c.NodeStartSteps < 0 || c.OriginLatency < 0:
		return fmt.Errorf("fig3: node start steps and origin latency must not be negative")
	}
	for _, r := range c.Rates {
		if r < 1 {
			return fmt.Errorf("fig3: a query rate must be positive, got %d", r)
		}
	}
	for _, n := range c.StaticNodes {
		if n < 1 || n > c.Ranges {
			return fmt.Errorf("fig3: a static cache needs 1 to %d nodes (one range each at least), got %d", c.Ranges, n)
		}
	}
	if err := c.Cache.Validate(); err != nil {
		return err
	}
	return c.Overflow.Validate()
}

// Fig3Run is one variant at one query rate.
type Fig3Run struct {
	Rate int `json:"rate"`
	// Variant is "static-N" or "elastic".
	Variant string `json:"variant"`
	// MissRate and Nodes are per bucket of BucketSteps steps: the share of
	// its queries that missed, and the nodes serving at its end.
	MissRate []float64 `json:"miss_rate"`
	Nodes    []int     `json:"nodes"`
	Queries  int       `json:"queries"`
	Misses   int       `json:"misses"`
	Evicted  int       `json:"evicted"`
	// OriginSeconds is the time queries spent waiting for the origin.
	OriginSeconds float64 `json:"origin_seconds"`
	// JoinedSteps are the steps at which nodes joined (elastic only).
	JoinedSteps []int `json:"joined_steps"`
	// NodeSteps sums the serving nodes over the steps: what the cache
	// cost, where the paper compares node counts.
	NodeSteps int `json:"node_steps"`
}

// RunFig3 runs every variant at every rate.
func RunFig3(cfg Fig3Config) ([]Fig3Run, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var out []Fig3Run
	for _, rate := range cfg.Rates {
		for _, n := range cfg.StaticNodes {
			out = append(out, runVariant(cfg, rate, n, false))
		}
		out = append(out, runVariant(cfg, rate, cfg.ElasticNodes, true))
	}
	return out, nil
}

// runVariant drives one cache through the query stream. Every variant of a
// rate draws the same keys (the same seed), so they differ only by how the
// cache holds them.
func runVariant(cfg Fig3Config, rate, nodes int, grow bool) Fig3Run {
	m := newModel(cfg, nodes, grow)
	run := Fig3Run{Rate: rate, Variant: fmt.Sprintf("static-%d", nodes), JoinedSteps: []int{}}
	if grow {
		run.Variant = "elastic"
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(rate)))
	stepLen := time.Second
	misses, queries := 0, 0
	for step := 0; step < cfg.Steps; step++ {
		now := modelEpoch.Add(time.Duration(step) * stepLen)
		for q := 0; q < rate; q++ {
			at := now.Add(time.Duration(q) * stepLen / time.Duration(rate))
			if !m.query(rng.IntN(cfg.Keys), at) {
				misses++
			}
			queries++
		}
		// The planner's round sees the step's inserts before the nodes'
		// eviction rounds (both run once a second on their own timers on
		// the server). The other order gives about the same miss rate now
		// that nodes shed below eviction's low-water mark; with both at
		// 95% it stalled the growth.
		end := now.Add(stepLen)
		if grow {
			run.JoinedSteps = append(run.JoinedSteps, m.grow(end, step+1)...)
		}
		for n := range m.nodes {
			m.evict(n, end)
		}
		run.NodeSteps += len(m.live)
		if (step+1)%cfg.BucketSteps == 0 || step == cfg.Steps-1 {
			run.MissRate = append(run.MissRate, float64(misses)/float64(queries))
			run.Nodes = append(run.Nodes, len(m.live))
			run.Queries += queries
			run.Misses += misses
			misses, queries = 0, 0
		}
	}
	run.Evicted = m.evicted
	run.OriginSeconds = float64(run.Misses) * cfg.OriginLatency.Seconds()
	return run
}

// modelEpoch is virtual time zero; any fixed instant would do.
var modelEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
