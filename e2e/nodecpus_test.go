package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestUpNodeCPUs: `tidekv up --node-cpus 0.3` runs each node in a cgroup of
// its own with a quota of 3 ms per 10 ms period, says so on each node line,
// ctl status shows every node's size, and the cgroups are gone once up has
// stopped its nodes.
func TestUpNodeCPUs(t *testing.T) {
	ctlr, err := cgroup.Open()
	if err != nil {
		t.Skipf("sized nodes need cgroups this test may create: %v", err)
	}
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	const nodes = 3
	u := startUp(t, bin, dir, testcluster.FreeBasePort(t, nodes), nodes, "--node-cpus", "0.3")

	groups := map[string]int{}
	for i := 1; i <= nodes; i++ {
		if got := u.nodes[i]["cpus"]; got != "0.3" {
			t.Errorf("node %d line says cpus=%q, want 0.3", i, got)
		}
		pids := serversUsing(filepath.Join(dir, fmt.Sprintf("node%d", i)))
		if len(pids) != 1 {
			t.Fatalf("node %d's server processes: %v, want one", i, pids)
		}
		g := nodeCgroup(t, ctlr, pids[0])
		if j, dup := groups[g]; dup {
			t.Fatalf("nodes %d and %d share the cgroup %s", j, i, g)
		}
		groups[g] = i
		v1, _ := os.ReadFile(filepath.Join(g, "cpu.cfs_quota_us"))
		p1, _ := os.ReadFile(filepath.Join(g, "cpu.cfs_period_us"))
		v2, _ := os.ReadFile(filepath.Join(g, "cpu.max"))
		if q := strings.TrimSpace(string(v1)) + "/" + strings.TrimSpace(string(p1)) + strings.TrimSpace(string(v2)); q != "3000/10000" && q != "/3000 10000" {
			t.Errorf("node %d's cgroup %s has quota %q, want 3000 µs per 10000", i, g, q)
		}
	}

	// Each node reports its size with its heartbeats, once a second.
	ctx := testCtx(t, time.Minute)
	var st cliformat.StatusView
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		out, _, err := ctl(ctx, bin, u.nodes[1]["grpc"], "status", "--json")
		if err != nil {
			return err
		}
		st = cliformat.StatusView{}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			return err
		}
		for _, n := range st.Nodes {
			if n.CPUQuota != 0.3 {
				return fmt.Errorf("node %d reports cpu_quota %v", n.ID, n.CPUQuota)
			}
		}
		if len(st.Nodes) != nodes {
			return fmt.Errorf("%d nodes in status", len(st.Nodes))
		}
		return nil
	}); err != nil {
		t.Fatalf("ctl status --json never showed every node at 0.3 CPUs: %v", err)
	}
	out, _, err := ctl(ctx, bin, u.nodes[1]["grpc"], "status")
	if err != nil {
		t.Fatal(err)
	}
	if head, _, _ := strings.Cut(out, "\n"); !strings.Contains(head, "CPUS") || strings.Count(out, " 0.3 ") < nodes {
		t.Errorf("ctl status lacks each node's size:\n%s", out)
	}

	u.stop(t, dir)
	for g, i := range groups {
		if _, err := os.Stat(g); !os.IsNotExist(err) {
			t.Errorf("node %d's cgroup %s still there after up stopped: %v", i, g, err)
		}
	}
}

// nodeCgroup returns the directory of pid's node cgroup, which up made
// under its own cgroup, the test's. Only the cpu hierarchy holds node
// cgroups, so the line naming one is that hierarchy's.
func nodeCgroup(t *testing.T, c *cgroup.Controller, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if name := filepath.Base(f[len(f)-1]); strings.HasPrefix(name, cgroup.NodePrefix) {
			return filepath.Join(c.Parent(), name)
		}
	}
	t.Fatalf("pid %d is in no node cgroup:\n%s", pid, b)
	return ""
}
