package launcher_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/launcher"
)

const host = "127.0.0.1"

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func freeBase(t *testing.T, nodes int) int {
	t.Helper()
	base, err := launcher.FreeBasePort(host, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// fakeSpec returns a spec for node 1 of a fresh block running the fake
// server in mode.
func fakeSpec(t *testing.T, mode string) launcher.NodeSpec {
	t.Helper()
	cfg := launcher.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.BasePort = freeBase(t, 1)
	cfg.Env = []string{fakeEnv + "=" + mode}
	return cfg.Node(1)
}

func startFake(t *testing.T, mode string) *launcher.Process {
	t.Helper()
	p, err := launcher.Start(self(t), fakeSpec(t, mode))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p
}

// startReady starts the fake server of spec and waits until it is ready.
func startReady(t *testing.T, spec launcher.NodeSpec) *launcher.Process {
	t.Helper()
	p, err := launcher.Start(self(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	if err := p.Ready(readyCtx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	return p
}

func readyCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func assertPortsFree(t *testing.T, spec launcher.NodeSpec) {
	t.Helper()
	for _, a := range []string{spec.GRPCAddr, spec.HTTPAddr} {
		_, port, _ := strings.Cut(a, ":")
		n, _ := strconv.Atoi(port)
		if err := launcher.PortsFree(host, n); err != nil {
			t.Errorf("after stop: %v", err)
		}
	}
}

func TestPorts(t *testing.T) {
	for _, tc := range []struct{ base, i, grpc, http int }{
		{7400, 1, 7400, 7401},
		{7400, 2, 7410, 7411},
		{7400, 3, 7420, 7421},
	} {
		g, h := launcher.Ports(tc.base, tc.i)
		if g != tc.grpc || h != tc.http {
			t.Errorf("Ports(%d, %d) = %d, %d; want %d, %d", tc.base, tc.i, g, h, tc.grpc, tc.http)
		}
	}
	if got := launcher.Port(7400, 2, launcher.OffsetRedis); got != 7412 {
		t.Errorf("redis port of node 2 = %d, want 7412", got)
	}
	if got := launcher.Port(7400, 3, launcher.OffsetGossip); got != 7423 {
		t.Errorf("gossip port of node 3 = %d, want 7423", got)
	}
}

func TestFreeBasePort(t *testing.T) {
	base := freeBase(t, 3)
	for p := base; p < base+3*launcher.PortsPerNode; p++ {
		if err := launcher.PortsFree(host, p); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseReadyLine(t *testing.T) {
	rl, ok := launcher.ParseReadyLine("tidekv: node 7 ready grpc=127.0.0.1:7400 http=127.0.0.1:7401 redis=x\n")
	if !ok || rl != (launcher.ReadyLine{NodeID: 7, GRPCAddr: "127.0.0.1:7400", HTTPAddr: "127.0.0.1:7401"}) {
		t.Errorf("got %+v, %v", rl, ok)
	}
	for _, bad := range []string{
		"", "tidekv: node x ready grpc=a http=b", "node 1 grpc=a http=b",
		"tidekv: node 1 ready grpc=a", "log: tidekv: node 1 ready grpc=a http=b",
	} {
		if _, ok := launcher.ParseReadyLine(bad); ok {
			t.Errorf("ParseReadyLine(%q) accepted", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := launcher.DefaultConfig()
	if err := good.Validate(); err == nil {
		t.Error("default config without Binary validated")
	}
	good.Binary = "/bin/true"
	if err := good.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, mut := range map[string]func(*launcher.Config){
		"nodes":        func(c *launcher.Config) { c.Nodes = 0 },
		"datadir":      func(c *launcher.Config) { c.DataDir = "" },
		"host":         func(c *launcher.Config) { c.Host = "" },
		"baseport":     func(c *launcher.Config) { c.BasePort = 0 },
		"port range":   func(c *launcher.Config) { c.BasePort = 65530 },
		"readytimeout": func(c *launcher.Config) { c.ReadyTimeout = 0 },
		"stoptimeout":  func(c *launcher.Config) { c.StopTimeout = -time.Second },
		"nodecpus":     func(c *launcher.Config) { c.NodeCPUs = 0.05 },
		"hog unsized":  func(c *launcher.Config) { c.Hog = 0.5 },
		"hog whole":    func(c *launcher.Config) { c.NodeCPUs, c.Hog = 0.3, 1 },
		"hog negative": func(c *launcher.Config) { c.NodeCPUs, c.Hog = 0.3, -0.5 },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: invalid config validated", name)
		}
	}
}

func TestNodeSpecArgs(t *testing.T) {
	cfg := launcher.DefaultConfig()
	cfg.DataDir = "/d"
	cfg.ExtraArgs = []string{"--x"}
	s := cfg.Node(2)
	s.Join = []string{"127.0.0.1:7400", "127.0.0.1:7420"}
	s.Label = "b"
	want := "server --data-dir /d/node2 --listen 127.0.0.1:7410 --http-listen 127.0.0.1:7411 --redis-listen 127.0.0.1:7412 --gossip-listen 127.0.0.1:7413 " +
		"--join 127.0.0.1:7400,127.0.0.1:7420 --node-label b --x"
	if got := strings.Join(s.Args(), " "); got != want {
		t.Errorf("Args:\n got %s\nwant %s", got, want)
	}
	if s.Log() != "/d/node2/tidekv.log" {
		t.Errorf("Log() = %s", s.Log())
	}
}

func TestProcessLifecycle(t *testing.T) {
	p := startFake(t, "normal")
	if err := p.Ready(readyCtx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	rl, ok := p.Announced()
	if !ok || rl.NodeID == 0 || p.NodeID() != rl.NodeID || rl.GRPCAddr != p.Spec().GRPCAddr || rl.HTTPAddr != p.Spec().HTTPAddr {
		t.Errorf("announced %+v, %v; node id %d; spec %+v", rl, ok, p.NodeID(), p.Spec())
	}
	if p.Exited() || p.ExitErr() != nil {
		t.Error("running process reported as exited")
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := p.Wait(); err != nil {
		t.Errorf("Wait after clean stop: %v", err)
	}
	if !p.StopRequested() {
		t.Error("StopRequested false after Stop")
	}
	assertPortsFree(t, p.Spec())
	log := p.LogTail(100)
	for _, want := range []string{"fake: starting", "fake: hello on stdout", "ready grpc=", "fake: shutting down", "exit status 0"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// Stopping an exited process is a no-op.
	if err := p.Stop(time.Second); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// A sized node runs in a cgroup of its own with its quota, gone once the
// node has stopped.
func TestSizedProcess(t *testing.T) {
	if _, err := cgroup.Open(); err != nil {
		t.Skipf("sized nodes need writable cgroups: %v", err)
	}
	spec := fakeSpec(t, "normal")
	spec.CPUs = 0.3
	p := startReady(t, spec)
	dir := p.Cgroup()
	own, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Pid()))
	if err != nil || dir == "" || !strings.Contains(string(own), "/"+filepath.Base(dir)+"\n") {
		t.Fatalf("pid %d in cgroups %s (%v), want %q", p.Pid(), own, err, dir)
	}
	v1, _ := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	v2, _ := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if q := strings.TrimSpace(string(v1) + string(v2)); q != "3000" && q != "3000 10000" {
		t.Fatalf("quota %q, want 3000 µs per 10000", q)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("cgroup %s still there after Stop: %v", dir, err)
	}
}

// A node with a co-runner (Config.Hog, node 1 only) shares its quota with
// a busy process in a cgroup inside its own; stopped or killed, the node
// takes the co-runner and both cgroups with it.
func TestCoRunnerLivesWithItsNode(t *testing.T) {
	if _, err := cgroup.Open(); err != nil {
		t.Skipf("sized nodes need writable cgroups: %v", err)
	}
	cfg := launcher.DefaultConfig()
	cfg.NodeCPUs, cfg.Hog = 0.3, 0.5
	if s := cfg.Node(2); s.Hog != 0 {
		t.Fatalf("node 2 has a co-runner (%v): only node 1 is hogged", s.Hog)
	}
	for name, end := range map[string]func(p *launcher.Process) error{
		"stop": func(p *launcher.Process) error { return p.Stop(10 * time.Second) },
		"kill": (*launcher.Process).Kill,
	} {
		t.Run(name, func(t *testing.T) {
			spec := fakeSpec(t, "normal")
			spec.CPUs, spec.Hog = cfg.NodeCPUs, cfg.Hog
			p := startReady(t, spec)
			hogDir := filepath.Join(p.Cgroup(), "hog")
			if q, _ := os.ReadFile(filepath.Join(hogDir, "cpu.cfs_quota_us")); strings.TrimSpace(string(q)) != "1500" {
				t.Fatalf("co-runner quota %q, want 1500 µs per 10000 (0.5 of 0.3 CPU)", q)
			}
			procs, err := os.ReadFile(filepath.Join(hogDir, "cgroup.procs"))
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(procs)))
			if err != nil {
				t.Fatalf("co-runner cgroup holds %q, want one pid", procs)
			}
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); args[len(args)-1] != launcher.HogCommand {
				t.Fatalf("pid %d in the co-runner cgroup runs %q, want the hog", pid, args)
			}
			usageDirs := coRunnerCounted(t, p.Pid(), pid)
			if err := end(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("co-runner pid %d after its node ended: kill(0) = %v, want ESRCH", pid, err)
			}
			for _, dir := range append([]string{hogDir, filepath.Dir(hogDir)}, usageDirs...) {
				if _, err := os.Stat(dir); !os.IsNotExist(err) {
					t.Errorf("cgroup %s still there after the node ended: %v", dir, err)
				}
			}
		})
	}
}

// coRunnerCounted checks that the usage node reads from its cgroup
// counts the co-runner hog's CPU time, and returns the node's and the
// hog's usage cgroups (cpuacct twins on this machine), which must go with
// them. Where the launcher's cpuacct cgroup is not at its cpu cgroup's
// path no usage is read (docs/operations.md, "Node CPU size"): nothing to
// count.
func coRunnerCounted(t *testing.T, node, hog int) []string {
	t.Helper()
	nr, err := cgroup.Of(node)
	if err != nil {
		t.Fatal(err)
	}
	hr, err := cgroup.Of(hog)
	if err != nil {
		t.Fatal(err)
	}
	if nr.UsageDir() == "" {
		self, _ := os.ReadFile("/proc/self/cgroup")
		t.Logf("no usage cgroup for the node: this test's cpuacct cgroup is not at its cpu cgroup's path (%q)", self)
		return nil
	}
	if filepath.Dir(hr.UsageDir()) != nr.UsageDir() {
		t.Fatalf("co-runner's usage in %s, want a child of the node's %s", hr.UsageDir(), nr.UsageDir())
	}
	// The hog spins from its start: wait until it has been charged.
	var hs cgroup.Stat
	for deadline := time.Now().Add(10 * time.Second); hs.Usage == 0; time.Sleep(10 * time.Millisecond) {
		if hs, err = hr.Read(); err != nil || !hs.UsageKnown {
			t.Fatalf("co-runner's usage: %+v, %v", hs, err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the co-runner used no CPU in 10 s")
		}
	}
	ns, err := nr.Read()
	if err != nil || !ns.UsageKnown || ns.Usage < hs.Usage {
		t.Fatalf("node's cgroup usage %+v, %v; want at least the co-runner's %v, read before it", ns, err, hs.Usage)
	}
	return []string{hr.UsageDir(), nr.UsageDir()}
}

func TestLogIsAppendedAcrossRuns(t *testing.T) {
	spec := fakeSpec(t, "normal")
	for run := 0; run < 2; run++ {
		p, err := launcher.Start(self(t), spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Ready(readyCtx(t, 20*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := p.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(spec.Log())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "fake: shutting down"); n != 2 {
		t.Errorf("log holds %d runs, want 2:\n%s", n, b)
	}
}

func TestKill(t *testing.T) {
	p := startFake(t, "normal")
	if err := p.Ready(readyCtx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("process still running after Kill")
	}
	if err := p.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Wait after kill = %v, want a 'killed' error", err)
	}
	assertPortsFree(t, p.Spec())
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	p := startFake(t, "ignore-term")
	if err := p.Ready(readyCtx(t, 20*time.Second)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := p.Stop(300 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "SIGKILL") {
		t.Errorf("Stop = %v, want an error about SIGKILL", err)
	}
	if !p.Exited() {
		t.Error("process survived Stop")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %v", d)
	}
}

func TestReadyReportsEarlyExit(t *testing.T) {
	p := startFake(t, "crash")
	err := p.Ready(readyCtx(t, 20*time.Second))
	if err == nil {
		t.Fatal("Ready succeeded for a crashing process")
	}
	for _, want := range []string{"exit status 3", "fake: boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Ready error lacks %q: %v", want, err)
		}
	}
}

func TestReadyTimesOut(t *testing.T) {
	for _, mode := range []string{"no-ready", "unhealthy"} {
		t.Run(mode, func(t *testing.T) {
			p := startFake(t, mode)
			if mode == "unhealthy" {
				// Ready's second step is under test: the 1 s deadline
				// must not also cover the process's start, which takes
				// longer than that on a busy machine.
				waitServingHealth(t, p)
			}
			err := p.Ready(readyCtx(t, time.Second))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Ready = %v, want deadline exceeded", err)
			}
			if mode == "unhealthy" && (err == nil || !strings.Contains(err.Error(), "503")) {
				t.Errorf("Ready error does not mention the health status: %v", err)
			}
		})
	}
}

// waitServingHealth waits until p has announced itself and its /health
// has answered (503 from the unhealthy fake).
func waitServingHealth(t *testing.T, p *launcher.Process) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		rl, ok := p.Announced()
		if !ok {
			continue
		}
		resp, err := http.Get("http://" + rl.HTTPAddr + "/health")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return
		}
	}
	t.Fatal("the fake did not announce itself and answer /health within 20 s")
}

func TestStartErrors(t *testing.T) {
	if _, err := launcher.Start(self(t), launcher.NodeSpec{GRPCAddr: "127.0.0.1:1"}); err == nil {
		t.Error("Start without a data dir succeeded")
	}
	spec := fakeSpec(t, "normal")
	if _, err := launcher.Start(filepath.Join(t.TempDir(), "missing"), spec); err == nil {
		t.Error("Start of a missing binary succeeded")
	}
}

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b bytes.Buffer
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := launcher.LogTail(path, 3), "line 98\nline 99\nline 100"; got != want {
		t.Errorf("LogTail = %q, want %q", got, want)
	}
	if got := launcher.LogTail(filepath.Join(t.TempDir(), "nope"), 3); !strings.Contains(got, "no log") {
		t.Errorf("LogTail of a missing file = %q", got)
	}
}

func fakeCluster(t *testing.T, nodes int) launcher.Config {
	cfg := launcher.DefaultConfig()
	cfg.Nodes = nodes
	cfg.DataDir = t.TempDir()
	cfg.BasePort = freeBase(t, nodes)
	cfg.Binary = self(t)
	cfg.Env = []string{fakeEnv + "=normal"}
	cfg.ReadyTimeout = 20 * time.Second
	cfg.StopTimeout = 5 * time.Second
	return cfg
}

// argsOf returns the argument lines the fake recorded for node i, one per
// start.
func argsOf(t *testing.T, cfg launcher.Config, i int) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cfg.Node(i).DataDir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestClusterBootstrapAndRestart(t *testing.T) {
	cfg := fakeCluster(t, 3)
	c, err := launcher.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Kill() })
	ctx := readyCtx(t, time.Minute)

	var order []int
	if err := c.Start(ctx, func(i int, p *launcher.Process) { order = append(order, i) }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(order) != "[1 2 3]" {
		t.Errorf("fresh cluster became ready in order %v, want [1 2 3]", order)
	}
	ids := map[int]uint64{}
	for i := 1; i <= 3; i++ {
		ids[i] = c.Process(i).NodeID()
		if has, _ := launcher.HasState(cfg.Node(i).DataDir); !has {
			t.Errorf("node %d has no state after start", i)
		}
	}
	node1 := cfg.Node(1).GRPCAddr
	if a := argsOf(t, cfg, 1)[0]; strings.Contains(a, "--join") {
		t.Errorf("bootstrapping node 1 got a join list: %s", a)
	}
	for i := 2; i <= 3; i++ {
		if a := argsOf(t, cfg, i)[0]; !strings.Contains(a, "--join "+node1+" ") && !strings.HasSuffix(a, "--join "+node1) {
			t.Errorf("node %d did not join through node 1: %s", i, a)
		}
	}

	// One node down and back: it rejoins through the others.
	if err := c.KillNode(2); err != nil {
		t.Fatal(err)
	}
	if c.Running(2) {
		t.Error("node 2 running after KillNode")
	}
	if _, err := c.StartNode(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartNode(ctx, 2); err == nil {
		t.Error("starting a running node succeeded")
	}

	// Whole cluster down and back: everybody joins everybody else.
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	order = nil
	if err := c.Start(ctx, func(i int, p *launcher.Process) { order = append(order, i) }); err != nil {
		t.Fatal(err)
	}
	if len(order) != 3 {
		t.Errorf("restart reported %v ready", order)
	}
	for i := 1; i <= 3; i++ {
		args := argsOf(t, cfg, i)
		last := args[len(args)-1]
		for j := 1; j <= 3; j++ {
			if j != i && !strings.Contains(last, cfg.Node(j).GRPCAddr) {
				t.Errorf("restarted node %d does not list node %d in %s", i, j, last)
			}
		}
		if got := c.Process(i).NodeID(); got != ids[i] {
			t.Errorf("node %d id changed across restart: %d -> %d", i, ids[i], got)
		}
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		assertPortsFree(t, cfg.Node(i))
	}
}

func TestClusterRefusesBusyPort(t *testing.T) {
	cfg := fakeCluster(t, 1)
	c1, _ := launcher.NewCluster(cfg)
	t.Cleanup(func() { c1.Kill() })
	if err := c1.Start(readyCtx(t, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.DataDir = t.TempDir()
	c2, _ := launcher.NewCluster(other)
	t.Cleanup(func() { c2.Kill() })
	err := c2.Start(readyCtx(t, time.Minute), nil)
	if err == nil || !strings.Contains(err.Error(), "not free") {
		t.Errorf("second cluster on the same ports: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for Up's writer goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUp(t *testing.T) {
	cfg := fakeCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var errOut syncBuffer
	upErr := make(chan error, 1)
	go func() {
		upErr <- launcher.Up(ctx, cfg, outW, &errOut)
		outW.Close()
	}()

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("up ended early: %v\nstderr:\n%s", <-upErr, errOut.String())
			}
			return l
		case <-time.After(time.Minute):
			t.Fatalf("timed out waiting for up; stderr:\n%s", errOut.String())
		}
		return ""
	}
	for i := 1; i <= 3; i++ {
		s := cfg.Node(i)
		want := fmt.Sprintf("node %d grpc=%s http=%s redis=%s", i, s.GRPCAddr, s.HTTPAddr, s.RedisAddr)
		if got := next(); got != want {
			t.Errorf("line %d = %q, want %q", i, got, want)
		}
	}
	// "cluster up" waits for /ready, which reports the replication gap.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(errOut.String(), "waiting for replication: range 1 has 1 of 3 voters on live nodes.\n") {
		if time.Now().After(deadline) {
			t.Fatalf("replication wait not reported; stderr:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case l := <-lines:
		t.Fatalf("%q printed before the cluster was ready", l)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(cfg.Node(1).DataDir, "replicated"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := next(), "cluster up: 3 nodes, 2 ranges with 3 voters each; try: tidekv ctl --addr "+cfg.Node(1).GRPCAddr+" status"; got != want {
		t.Errorf("hint line = %q, want %q", got, want)
	}

	// A crash (not requested by Up) is reported and the others keep running.
	pidb, err := os.ReadFile(filepath.Join(cfg.Node(2).DataDir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(pidb))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(errOut.String(), "node 2 exited unexpectedly") {
		if time.Now().After(deadline) {
			t.Fatalf("crash not reported; stderr:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(errOut.String(), "fake: starting") {
		t.Errorf("crash report lacks the log tail:\n%s", errOut.String())
	}
	if err := launcher.PortsFree(host, launcher.Port(cfg.BasePort, 1, launcher.OffsetGRPC)); err == nil {
		t.Error("node 1 stopped after node 2 crashed")
	}

	cancel()
	select {
	case err := <-upErr:
		if err != nil {
			t.Errorf("Up = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Up did not return after cancel")
	}
	for i := 1; i <= 3; i++ {
		assertPortsFree(t, cfg.Node(i))
	}
}

// WipeState leaves only the log: the directory then has no state.
func TestWipeState(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{launcher.LogName, "000001.log", "MANIFEST-000001"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "snapshots"), 0o755); err != nil {
		t.Fatal(err)
	}
	if has, err := launcher.HasState(dir); err != nil || !has {
		t.Fatalf("before: %v %v", has, err)
	}
	if err := launcher.WipeState(dir); err != nil {
		t.Fatal(err)
	}
	if has, err := launcher.HasState(dir); err != nil || has {
		t.Fatalf("after: %v %v", has, err)
	}
	if _, err := os.Stat(filepath.Join(dir, launcher.LogName)); err != nil {
		t.Fatalf("the log went too: %v", err)
	}
}
