package e2e

import (
	"testing"
	"time"

	"github.com/tidekv/tidekv/bench/cachebench"
	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// realCacheOptions runs the real-process cache experiments with the test's
// binary, nodes of a quarter CPU each where this process may make their
// cgroups (unsized otherwise, which the log says: the nodes then share
// the machine's cores).
func realCacheOptions(t *testing.T) cachebench.RealOptions {
	o := cachebench.DefaultRealOptions()
	o.Binary, o.Dir, o.Progress = testcluster.Binary(t), t.TempDir(), testWriter{t}
	if _, err := cgroup.Open(); err != nil {
		t.Logf("nodes unsized, sharing the machine's cores: %v", err)
	} else {
		o.NodeCPUs = 0.25
	}
	return o
}

// testWriter sends progress lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// The paper's Fig. 3 claim on real processes, small: reads that miss go
// to an origin and are cached; a static cache of 2 nodes holds about half
// the key space and evicts the rest, while a key space that grows from 2
// nodes (up to 5) ends with a miss rate over the last 10 s at or below
// the static cache's, which is the largest static cache here.
func TestRealCacheGrowsBelowStaticMissRate(t *testing.T) {
	tier.RequireLong(t, "two real-process caches read for 60 s each take about 3 minutes")
	cfg := cachebench.RealFig3Config()
	cfg.Keys, cfg.Steps, cfg.BucketSteps, cfg.Rates = 1500, 60, 10, []int{100}
	cfg.CapacityPerNode, cfg.StaticNodes, cfg.MaxNodes = 384<<10, []int{2}, 5
	runs, err := cachebench.RunRealFig3(testCtx(t, 10*time.Minute), cfg, realCacheOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("runs %+v", runs)
	}
	st, el := runs[0], runs[1]
	for _, r := range runs {
		t.Logf("%s: miss rates %.2f, nodes %v, %d evicted, %d failed, %d not found, %.0f B a key", r.Variant, r.MissRate, r.Nodes, r.Evicted, r.Failed, r.NotFound, r.BytesPerKey)
		if r.Failed+r.NotFound > r.Queries/100 {
			t.Errorf("%s: %d of %d reads failed or found nothing", r.Variant, r.Failed+r.NotFound, r.Queries)
		}
	}
	last := len(st.MissRate) - 1
	if st.Evicted == 0 {
		t.Errorf("static-2 evicted nothing: it should hold about half the key space")
	}
	if el.MissRate[last] > st.MissRate[last] {
		t.Errorf("the growing cache ends at a miss rate of %.3f, above static-2's %.3f (nodes %v)", el.MissRate[last], st.MissRate[last], el.Nodes)
	}
	if el.Nodes[last] <= 2 {
		t.Errorf("the growing cache never grew: nodes %v", el.Nodes)
	}
}

// The paper's Fig. 6 claim on real processes, small: a growing key space
// written at a steady rate spends less time with a node at its capacity,
// and evicts less, when nodes are asked for by the pre-launch rule than
// when T is fixed at the share nodes shed at.
func TestRealCachePrelaunchCutsOverhead(t *testing.T) {
	tier.RequireLong(t, "two real-process clusters written for 60 s each take about 3 minutes")
	cfg := cachebench.RealPrelaunchConfig()
	cfg.CapacityPerNode, cfg.MaxNodes, cfg.Duration = 512<<10, 5, time.Minute
	runs, err := cachebench.RunRealPrelaunch(testCtx(t, 10*time.Minute), cfg, realCacheOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("runs %+v", runs)
	}
	pre, fixed := runs[0], runs[1]
	for _, r := range runs {
		t.Logf("%s: %.0f full node-seconds, %d evicted, max share %.2f, joined at %v, %d of %d writes failed",
			r.Variant, r.FullNodeSeconds, r.EvictedKeys, r.MaxShare, r.JoinedSeconds, r.Failed, r.Writes)
		if len(r.JoinedSeconds) == 0 || r.Failed > r.Writes/100 {
			t.Errorf("%s: joined at %v, %d of %d writes failed", r.Variant, r.JoinedSeconds, r.Failed, r.Writes)
		}
	}
	if pre.EvictedKeys >= fixed.EvictedKeys || pre.FullNodeSeconds > fixed.FullNodeSeconds {
		t.Errorf("pre-launch: %d keys evicted, %.0f full node-seconds; T fixed: %d, %.0f: pre-launch should cost less",
			pre.EvictedKeys, pre.FullNodeSeconds, fixed.EvictedKeys, fixed.FullNodeSeconds)
	}
}
