package local

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/launcher"
	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// standInEnv makes the test binary act as a `tidekv server` that announces
// itself and exits 0 on SIGTERM, so OSProcs is tested on real processes
// without building the server.
const standInEnv = "TIDEKV_LOCAL_ACTUATOR_STAND_IN"

func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) != "" {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM)
		fmt.Println("tidekv: node 42 ready grpc=stand-in http=stand-in")
		<-sigs
		os.Exit(0)
	}
	testcluster.Main(m)
}

func TestOSProcsStartDetachedAndRemove(t *testing.T) {
	for _, cpus := range []float64{0, 0.3} {
		t.Run(fmt.Sprintf("cpus=%v", cpus), func(t *testing.T) {
			if cpus > 0 {
				if _, err := cgroup.Open(); err != nil {
					t.Skipf("sized nodes need writable cgroups: %v", err)
				}
			}
			testOSProcs(t, cpus)
		})
	}
}

func testOSProcs(t *testing.T, cpus float64) {
	c := DefaultConfig()
	c.Dir = filepath.Join(t.TempDir(), "autoscaled")
	c.Binary = os.Args[0]
	c.Env = []string{standInEnv + "=1"}
	c.StartCheck = 200 * time.Millisecond
	c.NodeCPUs = cpus
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.ScaleOut(ctx, 1, []string{"127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	n := mustNodes(t, a)[0]
	t.Cleanup(func() { syscall.Kill(n.PID, syscall.SIGKILL) })
	if !n.Alive {
		t.Fatalf("launched node not alive: %+v", n)
	}
	if pgid, err := syscall.Getpgid(n.PID); err != nil || pgid != n.PID {
		t.Fatalf("pgid %d (%v), want its own group %d", pgid, err, n.PID)
	}
	if (OSProcs{}).Alive(n.PID, "/some/other/dir") {
		t.Fatal("Alive accepted a process running another data dir (recycled PID)")
	}
	if cpus > 0 {
		procs, err := os.ReadFile(filepath.Join(n.Cgroup, "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(procs)) != fmt.Sprint(n.PID) {
			t.Fatalf("cgroup %q holds %q (%v), want pid %d", n.Cgroup, procs, err, n.PID)
		}
	}
	if _, err := a.Remove(ctx, control.Member{ID: 42, Addr: n.GRPCAddr}); err != nil {
		t.Fatal(err)
	}
	if (OSProcs{}).Alive(n.PID, n.DataDir) {
		t.Fatal("process still alive after Remove")
	}
	if _, err := os.Stat(n.Cgroup); cpus > 0 && !os.IsNotExist(err) {
		t.Fatalf("cgroup %s still there after Remove: %v", n.Cgroup, err)
	}
	log, _ := os.ReadFile(n.Log)
	if !strings.Contains(string(log), "node 42 ready") {
		t.Fatalf("log lacks the ready line:\n%s", log)
	}
}

// TestRealServerJoins starts a one-node cluster and lets the actuator add a
// real second server. It needs the tidekv binary: it runs when
// TIDEKV_BINARY names one or the long tier is on (then it builds it).
func TestRealServerJoins(t *testing.T) {
	if os.Getenv(testcluster.BinaryEnv) == "" && !tier.Long() {
		t.Skip("set TIDEKV_BINARY or " + tier.LongEnv + "=1 to run against the real server")
	}
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	lc := launcher.DefaultConfig()
	lc.Nodes, lc.DataDir, lc.Binary = 1, filepath.Join(dir, "data"), bin
	base, err := launcher.FreeBasePort(lc.Host, 1)
	if err != nil {
		t.Fatal(err)
	}
	lc.BasePort = base
	cl, err := launcher.NewCluster(lc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	t.Cleanup(func() { cl.Stop() })
	if err := cl.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Dir, c.Binary = DirBeside(lc.Node(1).DataDir), bin
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ScaleOut(ctx, 1, []string{lc.Node(1).GRPCAddr}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.StopAll(context.Background()) })
	n := mustNodes(t, a)[0]
	if n.DataDir != filepath.Join(dir, "data", "autoscaled", "node1") {
		t.Fatalf("data dir %s", n.DataDir)
	}
	if err := launcher.WaitHealthy(ctx, n.HTTPAddr); err != nil {
		t.Fatalf("joined node never healthy: %v\n%s", err, launcher.LogTail(n.Log, 20))
	}
	// The address the node advertises is the one recorded, so the
	// controller's member list maps onto the pidfiles.
	rl, ok := readyLine(ctx, n.Log)
	if !ok || rl.GRPCAddr != n.GRPCAddr || rl.NodeID < 2 {
		t.Fatalf("ready line %+v (found %v), want node >= 2 at %s", rl, ok, n.GRPCAddr)
	}
	members := []control.Member{{ID: 1, Addr: lc.Node(1).GRPCAddr}, {ID: rl.NodeID, Addr: rl.GRPCAddr}}
	if v, err := a.Victim(members); err != nil || v.ID != rl.NodeID {
		t.Fatalf("Victim = %+v, %v; want node %d", v, err, rl.NodeID)
	}
	if stopped, err := a.StopAll(ctx); err != nil || stopped != 1 {
		t.Fatalf("StopAll = %d, %v", stopped, err)
	}
}

// readyLine waits for the server's ready line in its log (/health can
// answer just before the line is printed).
func readyLine(ctx context.Context, log string) (launcher.ReadyLine, bool) {
	for {
		b, _ := os.ReadFile(log)
		for _, l := range strings.Split(string(b), "\n") {
			if rl, ok := launcher.ParseReadyLine(l); ok {
				return rl, true
			}
		}
		if sleep(ctx, 50*time.Millisecond) != nil {
			return launcher.ReadyLine{}, false
		}
	}
}
