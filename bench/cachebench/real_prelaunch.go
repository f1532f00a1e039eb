package cachebench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/sim"
)

// PrelaunchConfig is the pre-launch experiment (the paper's Fig. 6) on
// real processes: a growing key space written at a steady rate, with the
// pre-launch rule's threshold and with T fixed at the share nodes shed
// at (a node is asked for only when one is nearly full).
type PrelaunchConfig struct {
	// Nodes start the cluster; the local actuator may run up to MaxNodes.
	Nodes, MaxNodes int
	CapacityPerNode uint64
	// Writes of new keys with ValueBytes values, WriteRate bytes a
	// second, for Duration.
	ValueBytes int
	WriteRate  float64
	Duration   time.Duration
}

// RealPrelaunchConfig is sim.PrelaunchScenario scaled for real processes
// of this machine, the two variants in about 6 minutes: 1 MiB a node
// instead of 512 MiB and 32 KiB/s instead of 2 MiB/s (each of the two
// nodes fills at 1.6% of its capacity a second, the model's 0.2%, so that
// the few seconds a real node takes to start and take data matter as the
// model's minute does), 2 minutes instead of 15 (3.75 MiB: the cluster
// grows to 4 to 6 nodes), at most 6 nodes, values of 1 KiB.
func RealPrelaunchConfig() PrelaunchConfig {
	return PrelaunchConfig{Nodes: 2, MaxNodes: 6, CapacityPerNode: 1 << 20, ValueBytes: 1 << 10, WriteRate: 32 << 10, Duration: 2 * time.Minute}
}

// Validate returns one sentence naming the first bad value, or nil.
func (c PrelaunchConfig) Validate() error {
	switch {
	case c.Nodes < 1 || c.MaxNodes < c.Nodes:
		return fmt.Errorf("prelaunch: need 1 ≤ nodes (%d) ≤ max nodes (%d)", c.Nodes, c.MaxNodes)
	case c.CapacityPerNode == 0 || c.ValueBytes < 1 || c.WriteRate <= 0 || c.Duration <= 0:
		return fmt.Errorf("prelaunch: capacity, value size, write rate and duration must be positive")
	}
	return nil
}

// PrelaunchRun is one variant's run: the scale-out overhead is the time
// nodes sat at or over their capacity (writes to them evicted other
// keys, which later reads miss) and what they evicted.
type PrelaunchRun struct {
	// Variant is "prelaunch" or "fixed-T" (T the share it is fixed at).
	Variant string `json:"variant"`
	// FullNodeSeconds sums, over the once-a-second looks, the nodes at or
	// over their capacity; FirstFullSeconds is the first look with one
	// (−1: never). MaxShare is the highest share of its capacity a node
	// held at a look.
	FullNodeSeconds  float64 `json:"full_node_seconds"`
	FirstFullSeconds float64 `json:"first_full_seconds"`
	MaxShare         float64 `json:"max_share"`
	EvictedKeys      int     `json:"evicted_keys"`
	EvictedBytes     float64 `json:"evicted_bytes"`
	// JoinedSeconds are the looks at which the live nodes grew.
	JoinedSeconds []float64 `json:"joined_seconds"`
	Nodes         int       `json:"nodes"`
	NodeSeconds   float64   `json:"node_seconds"`
	// Writes, failed writes and the writes' p99 latency.
	Writes int     `json:"writes"`
	Failed int     `json:"failed"`
	P99Ms  float64 `json:"p99_ms"`
	// Fullest is the fullest node's share of its capacity at each look.
	Fullest []float64 `json:"fullest"`
	// Model is the simulator's run of the same config (sim.RunCache).
	Model sim.CacheMetrics `json:"model"`
}

// RunRealPrelaunch runs the pre-launch variant, then T fixed.
func RunRealPrelaunch(ctx context.Context, cfg PrelaunchConfig, o RealOptions) ([]PrelaunchRun, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var out []PrelaunchRun
	for _, pre := range []bool{true, false} {
		r, err := runPrelaunchVariant(ctx, cfg, o, pre)
		if err != nil {
			return out, fmt.Errorf("prelaunch %s: %w", r.Variant, err)
		}
		fmt.Fprintf(o.Progress, "%s: %.0f full node-seconds (first at %.0f s), %d keys evicted, nodes joined at %v s, %d nodes, %d of %d writes failed, model %.0f full node-seconds\n",
			r.Variant, r.FullNodeSeconds, r.FirstFullSeconds, r.EvictedKeys, r.JoinedSeconds, r.Nodes, r.Failed, r.Writes, r.Model.FullNodeSeconds)
		out = append(out, r)
	}
	return out, nil
}

// fixedAt is where the variant without pre-launch fixes T: the share
// nodes shed at, as sim.PrelaunchScenario does.
var fixedAt = elastic.DefaultOverflowConfig().ShedAt

func runPrelaunchVariant(ctx context.Context, cfg PrelaunchConfig, o RealOptions, pre bool) (PrelaunchRun, error) {
	run := PrelaunchRun{Variant: "prelaunch", FirstFullSeconds: -1, JoinedSeconds: []float64{}}
	settings := growSettings(o)
	if !pre {
		run.Variant = fmt.Sprintf("fixed-%g", fixedAt)
		settings["autoscale.cache-min-threshold"] = fmt.Sprint(fixedAt)
		settings["autoscale.cache-max-threshold"] = fmt.Sprint(fixedAt)
	}
	model, err := prelaunchModel(cfg, o, pre)
	if err != nil {
		return run, err
	}
	run.Model = model
	c, err := startCache(ctx, o, filepath.Join(o.Dir, run.Variant), cacheSpec{nodes: cfg.Nodes, maxNodes: cfg.MaxNodes,
		capacity: cfg.CapacityPerNode, grow: true, settings: settings})
	if err != nil {
		return run, err
	}
	defer c.stop()

	// The looks run beside the writes, once a second.
	done := make(chan struct{})
	var looks sync.WaitGroup
	looks.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start, last := time.Now(), cfg.Nodes
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			per, live, err := c.shares(ctx)
			if err != nil || live == 0 {
				continue
			}
			at := time.Since(start).Seconds()
			for ; last < live; last++ { // above any count seen: a join
				run.JoinedSeconds = append(run.JoinedSeconds, at)
			}
			run.NodeSeconds += float64(live)
			fullest := 0.0
			for _, s := range per {
				share := float64(s.bytes) / float64(cfg.CapacityPerNode)
				fullest = max(fullest, share)
				if share >= 1 {
					run.FullNodeSeconds++
					if run.FirstFullSeconds < 0 {
						run.FirstFullSeconds = at
					}
				}
			}
			run.Fullest = append(run.Fullest, fullest)
			run.MaxShare = max(run.MaxShare, fullest)
		}
	})

	val := make([]byte, cfg.ValueBytes)
	var failed atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var writes sync.WaitGroup
	sem := make(chan struct{}, o.Workers)
	every := time.Duration(float64(time.Second) * float64(cfg.ValueBytes) / cfg.WriteRate)
	start := time.Now()
	for i := 0; time.Since(start) < cfg.Duration && ctx.Err() == nil; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
		run.Writes++
		select {
		case sem <- struct{}{}:
		default:
			failed.Add(1)
			continue
		}
		key := fmt.Appendf(nil, "w%08d", i)
		writes.Go(func() {
			defer func() { <-sem }()
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			t0 := time.Now()
			if err := c.ks.Put(wctx, key, val); err != nil {
				failed.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, time.Since(t0))
			mu.Unlock()
		})
	}
	writes.Wait()
	close(done)
	looks.Wait()
	run.Failed = int(failed.Load())
	if len(lat) > 0 {
		slices.Sort(lat)
		run.P99Ms = float64(lat[len(lat)*99/100].Microseconds()) / 1000
	}
	run.Nodes = cfg.Nodes + len(run.JoinedSeconds)
	time.Sleep(4 * time.Second) // evictions reach the catalogue with heartbeats
	if rec, err := c.record(ctx); err == nil {
		run.EvictedKeys = int(rec.GetEvictions())
		if rec.GetKeys() > 0 {
			run.EvictedBytes = float64(run.EvictedKeys) * float64(rec.GetBytes()) / float64(rec.GetKeys())
		}
	}
	return run, ctx.Err()
}

// prelaunchModel runs the simulator's pre-launch scenario with cfg's
// sizes, rate and duration and the start time the real run tells its
// controller.
func prelaunchModel(cfg PrelaunchConfig, o RealOptions, pre bool) (sim.CacheMetrics, error) {
	c := sim.PrelaunchScenario(pre, 1)
	c.Nodes, c.Cache.CapacityPerNode, c.Growth, c.Duration = cfg.Nodes, cfg.CapacityPerNode, cfg.WriteRate, cfg.Duration
	c.Ranges, c.BytesPerRange = 8, 1
	c.StartDelay, c.Policy.NodeStartTime, c.Policy.MaxNodes = o.NodeStart, o.NodeStart, cfg.MaxNodes
	r, err := sim.RunCache(c)
	return r.Metrics, err
}
