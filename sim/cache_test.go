package sim

import (
	"strings"
	"testing"
	"time"
)

func runCache(t *testing.T, c CacheConfig) CacheResult {
	t.Helper()
	r, err := RunCache(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prelaunch=%v max-nodes=%d: %s", c.PreLaunch, c.Policy.MaxNodes, r.Metrics)
	return r
}

// A grow-mode key space filling at a steady rate on 2 nodes. With
// pre-launch every new node joins before any node reaches its capacity:
// nothing is evicted and no node sits full. With T fixed at 95% the first
// new node is asked for too late: nodes sit at capacity and evict while
// it starts.
func TestCachePrelaunchReadyBeforeFull(t *testing.T) {
	pre := runCache(t, PrelaunchScenario(true, 1))
	if pre.Metrics.FirstFull >= 0 || pre.Metrics.FullNodeSeconds != 0 || pre.Metrics.EvictedBytes != 0 {
		t.Errorf("with pre-launch: %s, want no node ever full", pre.Metrics)
	}
	if len(pre.Metrics.Joined) < 2 {
		t.Errorf("with pre-launch: %d node(s) joined, want the key space to grow at least twice", len(pre.Metrics.Joined))
	}
	var reason bool
	for _, l := range pre.Log {
		reason = reason || strings.Contains(l.Text, "pre-launch: key space \"cache\"") && strings.Contains(l.Text, "T = c/2")
	}
	if !reason {
		t.Errorf("with pre-launch: the log lacks the pre-launch reason with its terms")
	}
	late := runCache(t, PrelaunchScenario(false, 1))
	if late.Metrics.FirstFull < 0 || late.Metrics.FullNodeSeconds <= 0 || late.Metrics.EvictedBytes == 0 {
		t.Errorf("T fixed at 95%%: %s, want nodes full for a while and evicting", late.Metrics)
	}
	if len(late.Metrics.Joined) == 0 || late.Metrics.Joined[0] <= late.Metrics.FirstFull {
		t.Errorf("T fixed at 95%%: nodes joined at %v, want the first after a node was full at %v", late.Metrics.Joined, late.Metrics.FirstFull)
	}
}

// At max nodes no node may be added: eviction is the last resort, and
// the log says why nodes evict.
func TestCacheAtMaxNodesEvicts(t *testing.T) {
	c := PrelaunchScenario(true, 1)
	c.Policy.MaxNodes = 2
	r := runCache(t, c)
	if len(r.Metrics.Joined) != 0 || r.Metrics.EvictedBytes == 0 {
		t.Fatalf("at max nodes: %s, want no node added and evictions", r.Metrics)
	}
	var said bool
	for _, l := range r.Log {
		said = said || strings.Contains(l.Text, "no node may be added") && strings.Contains(l.Text, "max nodes 2")
	}
	if !said {
		t.Fatalf("the log does not say that no node may be added")
	}
}

// An evict-mode key space is not grown: its nodes evict at capacity.
func TestCacheEvictModeDoesNotGrow(t *testing.T) {
	c := PrelaunchScenario(true, 1)
	c.Cache.Grow = false
	r := runCache(t, c)
	if len(r.Metrics.Joined) != 0 || r.Metrics.EvictedBytes == 0 {
		t.Fatalf("evict mode: %s, want no node added and evictions", r.Metrics)
	}
}

// A node pushed to 97% of its capacity with room elsewhere (scaling
// disabled, placement's rebalancing off, so only the overflow policy
// moves data): it splits its fullest range at the median until a half
// is small enough to move, moves it to the emptiest node, and ends
// below the shed share without evicting.
func TestCacheShedsFullNode(t *testing.T) {
	c := PrelaunchScenario(true, 1)
	c.Policy.Enabled = false
	pol, err := Placement(map[string]string{"rf": "1", "rebalance": "false"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ClusterSpec{Nodes: 3, Ranges: 12, RF: 1, BytesPerRange: 4 << 20}, DefaultWorkload(), pol, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnableCache(c.Cache); err != nil {
		t.Fatal(err)
	}
	if err := s.EnableAutoscaler(c.Policy, DefaultNodeSpec(), c.StartDelay); err != nil {
		t.Fatal(err)
	}
	s.RunFor(10 * time.Second)
	if err := s.GrowData(480<<20, 1); err != nil {
		t.Fatal(err)
	}
	s.RunFor(time.Minute)
	var splits, moves int
	for _, l := range s.Log() {
		if strings.Contains(l.Text, "(overflow: ") {
			splits += strings.Count(l.Text, "split range")
			moves += strings.Count(l.Text, "move-replica range")
		}
	}
	m := s.CacheMetrics()
	t.Logf("%d overflow splits, %d moves; %s; n1 holds %.0f MiB", splits, moves, m, s.nodes[0].bytes/(1<<20))
	if splits == 0 || moves == 0 {
		t.Fatalf("%d overflow splits and %d moves, want both", splits, moves)
	}
	if s.nodes[0].bytes >= c.Policy.Overflow.ShedAt*float64(c.Cache.CapacityPerNode) || m.EvictedBytes != 0 || len(m.Joined) != 0 {
		t.Fatalf("n1 holds %.0f MiB; %s: want it under the shed share, nothing evicted, no node added", s.nodes[0].bytes/(1<<20), m)
	}
}
