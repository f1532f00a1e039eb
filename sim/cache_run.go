package sim

import (
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
)

// CacheConfig is one run of a cache key space filling up: a cluster that
// grows it through the overflow policy, with or without pre-launch.
type CacheConfig struct {
	// PreLaunch: T follows the pre-launch rule; without it T is fixed at
	// the shed share (a node is asked for only when one is nearly full).
	PreLaunch bool
	Nodes     int
	// Cache is the key space; Growth the bytes/s written to it.
	Cache  CacheSpec
	Growth float64
	// Ranges of BytesPerRange start the key space.
	Ranges        int
	BytesPerRange uint64
	// StartDelay is how long a started node takes to join.
	StartDelay time.Duration
	Duration   time.Duration
	Policy     elastic.Policy
	Seed       uint64
}

// CacheResult is a run's metrics and log.
type CacheResult struct {
	Config  CacheConfig
	Metrics CacheMetrics
	Log     []LogEntry
}

// PrelaunchScenario is the seed paper's Fig. 6 in miniature: a grow-mode
// key space of 512 MiB per node on 2 nodes, written at 2 MiB/s (each node
// fills at 1 MiB/s), new nodes that take a minute to start, 15 minutes.
func PrelaunchScenario(prelaunch bool, seed uint64) CacheConfig {
	p := elastic.DefaultPolicy()
	p.Enabled, p.Actuator, p.MaxNodes = true, "manual", 8
	p.NodeStartTime = time.Minute
	if !prelaunch {
		p.Overflow.MinThreshold, p.Overflow.MaxThreshold = p.Overflow.ShedAt, p.Overflow.ShedAt
	}
	return CacheConfig{PreLaunch: prelaunch, Nodes: 2, Cache: CacheSpec{Name: "cache", CapacityPerNode: 512 << 20, Grow: true},
		Growth: 2 << 20, Ranges: 16, BytesPerRange: 4 << 20, StartDelay: p.NodeStartTime, Duration: 15 * time.Minute, Policy: p, Seed: seed}
}

// RunCache runs one cache scenario in virtual time.
func RunCache(c CacheConfig) (CacheResult, error) {
	pol, err := Placement(map[string]string{"rf": "1"})
	if err != nil {
		return CacheResult{}, err
	}
	spec := ClusterSpec{Nodes: c.Nodes, Ranges: c.Ranges, RF: 1, BytesPerRange: c.BytesPerRange}
	w := DefaultWorkload()
	w.GrowthBytesPerSec = c.Growth
	s, err := New(spec, w, pol, Options{Seed: c.Seed})
	if err != nil {
		return CacheResult{}, err
	}
	if err := s.EnableCache(c.Cache); err != nil {
		return CacheResult{}, err
	}
	if err := s.EnableAutoscaler(c.Policy, DefaultNodeSpec(), c.StartDelay); err != nil {
		return CacheResult{}, err
	}
	s.RunFor(c.Duration)
	return CacheResult{Config: c, Metrics: s.CacheMetrics(), Log: s.Log()}, nil
}
