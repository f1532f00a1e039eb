package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestBenchElasticInterruptCleansUp: `tidekv bench elastic` on real
// processes, interrupted once its nodes are up, while it waits for the
// workload's ranges to spread (the longest wait before the load; it used
// to run out its minute after an interrupt), stops its nodes itself
// within half a minute,
// removes the cluster's directory and (sized, where cgroups may be made)
// the nodes' cgroups, node 1's co-runner (--hog) and its cgroup with
// them. Killed by the signal instead, its nodes die with it (Pdeathsig)
// and leave both behind.
func TestBenchElasticInterruptCleansUp(t *testing.T) {
	bin := testcluster.Binary(t)
	out := t.TempDir()
	args := []string{"bench", "elastic", "--scenario", "step", "--controller", "reactive", "--out", out}
	ctlr, err := cgroup.Open()
	if err == nil {
		args = append(args, "--node-cpus", "0.5", "--hog", "0.5")
	} else {
		t.Logf("unsized nodes (no cgroups to check): %v", err)
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	})

	for up := false; !up; {
		select {
		case l := <-lines:
			up = strings.HasSuffix(l, "waiting for their leases and replicas to spread")
		case err := <-done:
			t.Fatalf("bench elastic exited before its cluster was up: %v", err)
		case <-time.After(2 * time.Minute):
			t.Fatal("bench elastic: no cluster within 2 minutes")
		}
	}
	var hogs []int
	if ctlr != nil {
		hogs = coRunners(t, filepath.Join(ctlr.Parent(), fmt.Sprintf("%s%d-1", cgroup.NodePrefix, cmd.Process.Pid)))
		if len(hogs) != 1 {
			t.Errorf("node 1's co-runner cgroup holds %v, want one hog", hogs)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		// Stopped, not killed: it exits on its own (with the run's
		// cancellation as its error).
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Errorf("bench elastic was killed by %v instead of stopping its cluster", ws.Signal())
		}
		t.Logf("bench elastic exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("bench elastic did not exit within 30 s of SIGTERM")
	}

	clusters, _ := filepath.Glob(filepath.Join(out, "cluster-*"))
	if len(clusters) > 0 {
		t.Errorf("cluster directories left behind: %v", clusters)
	}
	if pids := serversUsing(out); len(pids) > 0 {
		t.Errorf("server processes left running: %v", pids)
	}
	if ctlr != nil {
		left, _ := filepath.Glob(filepath.Join(ctlr.Parent(), fmt.Sprintf("%s%d-*", cgroup.NodePrefix, cmd.Process.Pid)))
		for _, g := range left {
			cgroup.Remove(g) // waits for its node to go: the test must not leak it
		}
		if len(left) > 0 {
			t.Errorf("node cgroups left behind: %v", left)
		}
	}
	for _, pid := range hogs {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("co-runner pid %d left running (kill(0) = %v)", pid, err)
		}
	}
}

// coRunners are the pids in the co-runner cgroup of the node cgroup dir.
func coRunners(t *testing.T, dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "hog", "cgroup.procs"))
	if err != nil {
		t.Errorf("node 1's co-runner: %v", err)
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
