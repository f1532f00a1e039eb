package sim

import (
	"strings"
	"testing"
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
	if late.Metrics.FirstFull < 0 || late.Metrics.FullNodeSeconds < 30 || late.Metrics.EvictedBytes == 0 {
		t.Errorf("T fixed at 95%%: %s, want nodes full for a while (≥ 30 node-seconds) and evicting", late.Metrics)
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
