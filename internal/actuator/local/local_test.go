package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/launcher"
)

// fakeProcs is an in-memory Procs: processes are entries that signals end.
type fakeProcs struct {
	mu       sync.Mutex
	next     int
	procs    map[int]*fakeProc
	signals  []string // "TERM 1001"
	startErr error
	// exitAtOnce makes started processes die immediately (bad flags).
	exitAtOnce bool
	// ignoreTerm makes processes survive SIGTERM.
	ignoreTerm bool
	// cgroups are the sized nodes' cgroups not yet removed.
	cgroups []string
}

type fakeProc struct {
	spec  launcher.NodeSpec
	alive bool
}

func newFakeProcs() *fakeProcs { return &fakeProcs{next: 1000, procs: map[int]*fakeProc{}} }

func (f *fakeProcs) Start(binary string, spec launcher.NodeSpec) (int, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.startErr != nil {
		return 0, "", f.startErr
	}
	f.next++
	f.procs[f.next] = &fakeProc{spec: spec, alive: !f.exitAtOnce}
	if spec.CPUs == 0 {
		return f.next, "", nil
	}
	dir := fmt.Sprintf("/cg/%d", f.next)
	f.cgroups = append(f.cgroups, dir)
	return f.next, dir, nil
}

func (f *fakeProcs) RemoveCgroup(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cgroups = slices.DeleteFunc(f.cgroups, func(d string) bool { return d == dir })
	return nil
}

func (f *fakeProcs) Alive(pid int, dataDir string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.procs[pid]
	return ok && p.alive && p.spec.DataDir == dataDir
}

func (f *fakeProcs) Signal(pid int, sig syscall.Signal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGKILL: "KILL"}[sig]
	f.signals = append(f.signals, fmt.Sprintf("%s %d", name, pid))
	p, ok := f.procs[pid]
	if !ok || !p.alive {
		return syscall.ESRCH
	}
	if sig == syscall.SIGKILL || !f.ignoreTerm {
		p.alive = false
	}
	return nil
}

func (f *fakeProcs) Signals() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.signals)
}

func testConfig(t *testing.T) Config {
	c := DefaultConfig()
	c.Dir = filepath.Join(t.TempDir(), "autoscaled")
	c.Binary = "/nonexistent/tidekv"
	c.StartCheck = 0
	c.StopGrace = 100 * time.Millisecond
	return c
}

func newTest(t *testing.T, c Config) (*Actuator, *fakeProcs) {
	t.Helper()
	p := newFakeProcs()
	a, err := newActuator(c, p)
	if err != nil {
		t.Fatal(err)
	}
	return a, p
}

func TestScaleOutStartsRecordedJoiningNodes(t *testing.T) {
	c := testConfig(t)
	c.ExtraArgs = []string{"--replication-factor", "3"}
	a, p := newTest(t, c)
	msg, err := a.ScaleOut(context.Background(), 2, []string{"127.0.0.1:7400"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "started 2 node(s)") || !strings.Contains(msg, "node1") || !strings.Contains(msg, "node2") {
		t.Fatalf("message %q", msg)
	}
	nodes, err := a.Nodes()
	if err != nil || len(nodes) != 2 {
		t.Fatalf("Nodes = %+v, %v", nodes, err)
	}
	for i, n := range nodes {
		if n.Index != i+1 || !n.Alive || n.DataDir != filepath.Join(c.Dir, fmt.Sprintf("node%d", i+1)) {
			t.Fatalf("node %d recorded as %+v", i+1, n)
		}
		args := strings.Join(p.procs[n.PID].spec.Args(), " ")
		for _, want := range []string{"--join 127.0.0.1:7400", "--listen " + n.GRPCAddr, "--data-dir " + n.DataDir, "--replication-factor 3", "--redis-listen", "--gossip-listen"} {
			if !strings.Contains(args, want) {
				t.Fatalf("node%d args %q lack %q", n.Index, args, want)
			}
		}
	}
	if nodes[0].GRPCAddr == nodes[1].GRPCAddr {
		t.Fatalf("both nodes got %s", nodes[0].GRPCAddr)
	}
}

func TestScaleOutRefusals(t *testing.T) {
	c := testConfig(t)
	c.MaxNodes = 2
	a, p := newTest(t, c)
	ctx := context.Background()
	for _, tc := range []struct {
		count int
		join  []string
		want  string
	}{
		{0, []string{"a:1"}, "count must be >= 1"},
		{1, nil, "at least one live member"},
		{3, []string{"a:1"}, "exceed MaxNodes 2"},
	} {
		if _, err := a.ScaleOut(ctx, tc.count, tc.join); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("ScaleOut(%d, %v): err %v, want %q", tc.count, tc.join, err, tc.want)
		}
	}
	if len(p.procs) != 0 {
		t.Fatalf("a refused scale-out started %d processes", len(p.procs))
	}
	p.startErr = fmt.Errorf("exec: no such file")
	if _, err := a.ScaleOut(ctx, 1, []string{"a:1"}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("failed start: err %v", err)
	}
	if nodes, _ := a.Nodes(); len(nodes) != 0 {
		t.Fatalf("failed start left records %+v", nodes)
	}
}

func TestStartCheckCatchesImmediateExit(t *testing.T) {
	c := testConfig(t)
	c.StartCheck = 10 * time.Millisecond
	a, p := newTest(t, c)
	p.exitAtOnce = true
	_, err := a.ScaleOut(context.Background(), 1, []string{"a:1"})
	if err == nil || !strings.Contains(err.Error(), "exited within") {
		t.Fatalf("err %v, want an early-exit error", err)
	}
}

func TestVictimIsNewestLaunchedMember(t *testing.T) {
	c := testConfig(t)
	a, _ := newTest(t, c)
	if _, err := a.ScaleOut(context.Background(), 3, []string{"a:1"}); err != nil {
		t.Fatal(err)
	}
	nodes, _ := a.Nodes()
	members := []control.Member{
		{ID: 1, Addr: "127.0.0.1:7400"}, // started by `up`, not by us
		{ID: 7, Addr: nodes[2].GRPCAddr},
		{ID: 5, Addr: nodes[0].GRPCAddr},
		{ID: 9, Addr: nodes[1].GRPCAddr},
	}
	if v, err := a.Victim(members); err != nil || v.ID != 7 {
		t.Fatalf("Victim = %+v, %v; want ID 7 (node3, the newest)", v, err)
	}
	// A controller restarted elsewhere finds the same nodes from the
	// pidfiles.
	b, _ := newActuator(c, a.procs)
	if v, err := b.Victim(members); err != nil || v.ID != 7 {
		t.Fatalf("second actuator: Victim = %+v, %v", v, err)
	}
	if _, err := a.Victim(members[:1]); err == nil {
		t.Fatal("Victim chose a node the actuator did not launch")
	}
}

func TestRemoveStopsDeletesDataKeepsLog(t *testing.T) {
	c := testConfig(t)
	a, p := newTest(t, c)
	ctx := context.Background()
	if _, err := a.ScaleOut(ctx, 1, []string{"a:1"}); err != nil {
		t.Fatal(err)
	}
	n := mustNodes(t, a)[0]
	must(t, os.WriteFile(n.Log, []byte("log\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(n.DataDir, "engine"), 0o755))
	must(t, os.WriteFile(filepath.Join(n.DataDir, "engine", "000001.sst"), []byte("x"), 0o644))

	if _, err := a.Remove(ctx, control.Member{ID: 4, Addr: "127.0.0.1:1"}); err == nil {
		t.Fatal("Remove of a member the actuator did not launch succeeded")
	}
	msg, err := a.Remove(ctx, control.Member{ID: 4, Addr: n.GRPCAddr})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "node 4 (node1") || !strings.Contains(msg, "stopped; data deleted, log kept") {
		t.Fatalf("message %q", msg)
	}
	if got := p.Signals(); !slices.Equal(got, []string{fmt.Sprintf("TERM %d", n.PID)}) {
		t.Fatalf("signals %v, want one SIGTERM", got)
	}
	entries, _ := os.ReadDir(n.DataDir)
	if len(entries) != 1 || entries[0].Name() != launcher.LogName {
		t.Fatalf("data dir after Remove holds %v, want only the log", entries)
	}
	if _, err := os.Stat(pidPath(c.Dir, 1)); !os.IsNotExist(err) {
		t.Fatalf("pidfile still there: %v", err)
	}
	// A retry (the first reply was lost) is a no-op.
	msg, err = a.Remove(ctx, control.Member{ID: 4, Addr: n.GRPCAddr})
	if err != nil || !strings.Contains(msg, "already removed") || len(p.Signals()) != 1 {
		t.Fatalf("second Remove = %q, %v; signals %v", msg, err, p.Signals())
	}
	// The index is not reused.
	if _, err := a.ScaleOut(ctx, 1, []string{"a:1"}); err != nil {
		t.Fatal(err)
	}
	if nodes := mustNodes(t, a); len(nodes) != 1 || nodes[0].Index != 2 {
		t.Fatalf("after Remove and ScaleOut: %+v, want node2 only", nodes)
	}
}

func TestRemoveKillsAfterGrace(t *testing.T) {
	c := testConfig(t)
	a, p := newTest(t, c)
	p.ignoreTerm = true
	ctx := context.Background()
	if _, err := a.ScaleOut(ctx, 1, []string{"a:1"}); err != nil {
		t.Fatal(err)
	}
	n := mustNodes(t, a)[0]
	msg, err := a.Remove(ctx, control.Member{ID: 2, Addr: n.GRPCAddr})
	if err != nil || !strings.Contains(msg, "killed") {
		t.Fatalf("Remove = %q, %v", msg, err)
	}
	want := []string{fmt.Sprintf("TERM %d", n.PID), fmt.Sprintf("KILL %d", n.PID)}
	if got := p.Signals(); !slices.Equal(got, want) {
		t.Fatalf("signals %v, want %v", got, want)
	}
}

func TestStopAllKeepsRecords(t *testing.T) {
	a, _ := newTest(t, testConfig(t))
	if _, err := a.ScaleOut(context.Background(), 2, []string{"a:1"}); err != nil {
		t.Fatal(err)
	}
	n, err := a.StopAll(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("StopAll = %d, %v", n, err)
	}
	nodes := mustNodes(t, a)
	if len(nodes) != 2 || nodes[0].Alive || nodes[1].Alive {
		t.Fatalf("after StopAll: %+v, want two stopped records", nodes)
	}
}

// Sized nodes get a cgroup each, recorded so that whichever controller
// stops them removes it: on Remove, on Remove of a node that had exited by
// itself, and on StopAll.
func TestSizedNodesCgroupsRemovedWithThem(t *testing.T) {
	c := testConfig(t)
	c.NodeCPUs = 0.3
	a, p := newTest(t, c)
	ctx := context.Background()
	if _, err := a.ScaleOut(ctx, 3, []string{"a:1"}); err != nil {
		t.Fatal(err)
	}
	nodes := mustNodes(t, a)
	for _, n := range nodes {
		if n.Cgroup == "" || p.procs[n.PID].spec.CPUs != 0.3 {
			t.Fatalf("node %+v started with %v CPUs, want 0.3 and a recorded cgroup", n, p.procs[n.PID].spec.CPUs)
		}
	}
	if _, err := a.Remove(ctx, control.Member{ID: 4, Addr: nodes[0].GRPCAddr}); err != nil {
		t.Fatal(err)
	}
	must(t, p.Signal(nodes[1].PID, syscall.SIGKILL)) // exits by itself
	if _, err := a.Remove(ctx, control.Member{ID: 5, Addr: nodes[1].GRPCAddr}); err != nil {
		t.Fatal(err)
	}
	if want := []string{nodes[2].Cgroup}; !slices.Equal(p.cgroups, want) {
		t.Fatalf("cgroups left %v, want only the running node's %v", p.cgroups, want)
	}
	if n, err := a.StopAll(ctx); err != nil || n != 1 {
		t.Fatalf("StopAll = %d, %v", n, err)
	}
	if len(p.cgroups) != 0 {
		t.Fatalf("cgroups left after StopAll: %v", p.cgroups)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.Dir = "" },
		func(c *Config) { c.Host = "" },
		func(c *Config) { c.MaxNodes = 0 },
		func(c *Config) { c.StartCheck = -1 },
		func(c *Config) { c.StopGrace = 0 },
		func(c *Config) { c.NodeCPUs = 0.05 },
	} {
		c := DefaultConfig()
		c.Dir = "x"
		mut(&c)
		if _, err := New(c); err == nil {
			t.Fatalf("config %+v accepted", c)
		}
	}
	if got := DirBeside("/d/tidekv-data/node2/"); got != "/d/tidekv-data/autoscaled" {
		t.Fatalf("DirBeside = %s", got)
	}
	c := DefaultConfig()
	c.Dir = "rel/autoscaled"
	a, err := New(c)
	if err != nil || !filepath.IsAbs(a.cfg.Dir) {
		t.Fatalf("relative Dir: %v, %v", a, err)
	}
}

func mustNodes(t *testing.T, a *Actuator) []Node {
	t.Helper()
	nodes, err := a.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
