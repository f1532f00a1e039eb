package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/launcher"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// upProc is a running `tidekv up`.
type upProc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	lines  chan string   // stdout lines
	done   chan struct{} // closed when the process has exited
	err    error         // its exit error, valid after done
	nodes  map[int]map[string]string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startUp runs `tidekv up` (with extra arguments) and reads its report:
// one "node <i> k=v..." line per node, then the "cluster up:" hint.
// `tidekv up` runs its nodes insecure, by design (docs/security.md): in
// secure mode the tests that start it skip.
func startUp(t *testing.T, bin, dir string, base, nodes int, extra ...string) *upProc {
	t.Helper()
	if testcluster.Secure() {
		t.Skip("tidekv up starts insecure nodes only (it makes no certificates); secure mode has nothing to test here")
	}
	u := &upProc{
		stderr: &lockedBuffer{},
		lines:  make(chan string, 100),
		done:   make(chan struct{}),
		nodes:  map[int]map[string]string{},
	}
	u.cmd = exec.Command(bin, append([]string{"up", "--nodes", strconv.Itoa(nodes), "--data-dir", dir, "--base-port", strconv.Itoa(base)}, extra...)...)
	u.cmd.Stderr = u.stderr
	stdout, err := u.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			u.lines <- sc.Text()
		}
		close(u.lines)
		u.err = u.cmd.Wait()
		close(u.done)
	}()
	t.Cleanup(func() {
		// On an early failure: stop it the way a user would, then harder.
		if u.exited() {
			return
		}
		u.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-u.done:
		case <-time.After(20 * time.Second):
			u.cmd.Process.Kill()
			<-u.done
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tidekv up stderr:\n%s", u.stderr.String())
			for i := 1; i <= nodes; i++ {
				p := filepath.Join(dir, fmt.Sprintf("node%d", i), launcher.LogName)
				t.Logf("--- %s ---\n%s", p, launcher.LogTail(p, 40))
			}
		}
	})

	timeout := time.After(90 * time.Second)
	for hinted := false; !hinted; {
		var line string
		select {
		case l, ok := <-u.lines:
			if !ok {
				<-u.done
				t.Fatalf("tidekv up exited early (%v) after %d node lines", u.err, len(u.nodes))
			}
			line = l
		case <-timeout:
			t.Fatalf("tidekv up: %d of %d nodes reported ready in time", len(u.nodes), nodes)
		}
		if strings.HasPrefix(line, "cluster up:") {
			if len(u.nodes) != nodes {
				t.Fatalf("hint line before every node was up: %q", line)
			}
			if !strings.Contains(line, "tidekv ctl --addr ") {
				t.Errorf("hint line lacks a ctl example: %q", line)
			}
			hinted = true
			continue
		}
		i, kv := parseNodeLine(t, line)
		if _, dup := u.nodes[i]; dup || i < 1 || i > nodes {
			t.Fatalf("unexpected node line %q", line)
		}
		u.nodes[i] = kv
	}
	return u
}

func (u *upProc) exited() bool {
	select {
	case <-u.done:
		return true
	default:
		return false
	}
}

// parseNodeLine parses "node <i> key=value key=value...".
func parseNodeLine(t *testing.T, line string) (int, map[string]string) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "node" {
		t.Fatalf("unexpected line from tidekv up: %q", line)
	}
	i, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("bad node index in %q", line)
	}
	kv := map[string]string{}
	for _, field := range f[2:] {
		k, v, ok := strings.Cut(field, "=")
		if !ok {
			t.Fatalf("field %q of %q is not key=value", field, line)
		}
		kv[k] = v
	}
	return i, kv
}

// checkAddrs checks that node i reported the addresses of its port block.
func (u *upProc) checkAddrs(t *testing.T, base int) {
	t.Helper()
	for i := 1; i <= len(u.nodes); i++ {
		grpc, http := launcher.Ports(base, i)
		want := map[string]string{
			"grpc": fmt.Sprintf("127.0.0.1:%d", grpc),
			"http": fmt.Sprintf("127.0.0.1:%d", http),
		}
		for k, v := range want {
			if got := u.nodes[i][k]; got != v {
				t.Errorf("node %d %s=%q, want %q", i, k, got, v)
			}
		}
	}
}

// stop sends SIGTERM and checks that up exits 0 and that no server
// survives it.
func (u *upProc) stop(t *testing.T, dir string) {
	t.Helper()
	start := time.Now()
	if err := u.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-u.done:
	case <-time.After(30 * time.Second):
		t.Fatal("tidekv up did not exit within 30s of SIGTERM")
	}
	if u.err != nil {
		t.Errorf("tidekv up exited with %v, want 0", u.err)
	}
	t.Logf("tidekv up stopped in %v", time.Since(start).Round(time.Millisecond))
	for i, kv := range u.nodes {
		for _, k := range []string{"grpc", "http"} {
			if l, err := net.Listen("tcp", kv[k]); err != nil {
				t.Errorf("node %d's %s address %s still in use after up exited: %v", i, k, kv[k], err)
			} else {
				l.Close()
			}
		}
	}
	if pids := serversUsing(dir); len(pids) > 0 {
		t.Errorf("server processes %v still running on %s after up exited", pids, dir)
	}
}

// serversUsing lists processes whose command line mentions dir (Linux; on
// other systems it finds none and the port check above must do).
func serversUsing(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir)) && bytes.Contains(b, []byte("server")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestUpCommandPrintsNodes(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	const nodes = 3
	base := testcluster.FreeBasePort(t, nodes)

	// First run creates the cluster.
	u := startUp(t, bin, dir, base, nodes)
	u.checkAddrs(t, base)
	ctx := testCtx(t, 2*time.Minute)
	addr1, addr2 := u.nodes[1]["grpc"], u.nodes[2]["grpc"]
	if err := eventually(ctx, 15*time.Second, func(ctx context.Context) error {
		_, _, err := ctl(ctx, bin, addr1, "put", "k", "v")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if out, code, err := ctl(ctx, bin, addr2, "get", "k"); err != nil || out != "v" {
		t.Errorf("ctl get k via node 2 = %q, exit %d, %v; want \"v\"", out, code, err)
	}
	if out, code, _ := ctl(ctx, bin, addr1, "get", "missing"); code != 1 {
		t.Errorf("ctl get missing = %q, exit %d; want exit 1", out, code)
	}
	u.stop(t, dir)

	// Second run on the same directory restarts the same cluster.
	u = startUp(t, bin, dir, base, nodes)
	u.checkAddrs(t, base)
	var out string
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		var err error
		out, _, err = ctl(ctx, bin, u.nodes[3]["grpc"], "get", "k")
		return err
	}); err != nil || out != "v" {
		t.Errorf("after restart, ctl get k = %q, %v; want \"v\"", out, err)
	}
	u.stop(t, dir)
}

// failoverBound is how long writes may fail after the node holding every
// lease is SIGKILLed: the followers' election timeout (10 ticks of 100 ms,
// randomised by raft up to twice that, so at most 2 s), then the new
// leader's first lease (half an election timeout after a heartbeat round),
// plus the client's backoff and CI slack. Measured: 1.1-1.6 s.
const failoverBound = 10 * time.Second

// TestUpReadyThenKill: once `tidekv up` says the cluster is up, any one node
// may die. Node 1 bootstrapped the cluster and holds the meta range's and
// the first range's leases, the worst node to lose; writes and status
// through node 2 must work again within failoverBound, and /ready comes
// back (2 live nodes, 2 voters each) without node 1.
func TestUpReadyThenKill(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	const nodes = 3
	u := startUp(t, bin, dir, testcluster.FreeBasePort(t, nodes), nodes)
	pids := serversUsing(filepath.Join(dir, "node1")) // only 3 nodes: no node1x
	if len(pids) != 1 {
		t.Fatalf("node 1's server processes: %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	ctx := testCtx(t, time.Minute)
	cl := newClient(t, []string{u.nodes[2]["grpc"]})
	for i := 0; ; i++ {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := cl.Put(actx, []byte("after-kill"), []byte(strconv.Itoa(i)))
		cancel()
		if err == nil {
			break
		}
		if time.Since(killed) > failoverBound {
			t.Fatalf("writes through node 2 still failing %v after node 1 was killed: %v", failoverBound, err)
		}
	}
	t.Logf("first write through node 2 succeeded %v after SIGKILL of node 1", time.Since(killed).Round(time.Millisecond))
	if _, _, err := ctl(ctx, bin, u.nodes[2]["grpc"], "status"); err != nil {
		t.Errorf("ctl status through node 2 after the kill: %v", err)
	}
	r, err := launcher.WaitReady(testCtx(t, failoverBound), []string{u.nodes[2]["http"]}, nil)
	if err != nil {
		t.Fatalf("/ready on node 2 after the kill: %v", err)
	}
	if r.LiveNodes != 2 {
		t.Errorf("/ready after the kill: %+v, want 2 live nodes", r)
	}
	t.Logf("/ready answered 200 again %v after the kill", time.Since(killed).Round(time.Millisecond))
}
