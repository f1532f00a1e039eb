package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/launcher"
)

// Procs runs and signals server processes. The actuator's only side
// effects on processes go through it, so tests can use a fake.
type Procs interface {
	// Start runs `binary` with spec.Args() detached from the caller and
	// returns its PID and, for a sized node (spec.CPUs), its cgroup.
	Start(binary string, spec launcher.NodeSpec) (pid int, cgroupDir string, err error)
	// Alive reports whether pid is a running server on dataDir (not a
	// recycled PID, not a zombie).
	Alive(pid int, dataDir string) bool
	// Signal sends sig to pid.
	Signal(pid int, sig syscall.Signal) error
	// RemoveCgroup deletes a stopped node's cgroup; one already gone is
	// not an error.
	RemoveCgroup(dir string) error
}

// OSProcs is the real Procs.
type OSProcs struct{}

// Start runs the server in its own session-less process group without a
// parent-death signal, so it outlives the process that started it (the
// controller that launches a node can die with its own node and a
// successor then finds the launched node through its pidfile). Stdout and
// stderr go straight to the node's log file rather than through a pipe: a
// server whose stdout reader died would get SIGPIPE on its next write.
// launcher.Start is not used because it does both of those things
// deliberately the other way. A sized node is moved into its cgroup right
// after it starts (launcher.StartSized); whoever reaps it (this process
// while it lives, else Remove or StopAll) removes the cgroup.
func (OSProcs) Start(binary string, spec launcher.NodeSpec) (int, string, error) {
	if err := os.MkdirAll(spec.DataDir, 0o755); err != nil {
		return 0, "", err
	}
	logf, err := os.OpenFile(spec.Log(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, "", err
	}
	defer logf.Close() // the child holds its own descriptor
	args := spec.Args()
	fmt.Fprintf(logf, "=== local actuator %s: starting %s %s\n",
		time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The index is unique within Dir, the pid among launchers.
	group, err := launcher.StartSized(cmd, spec, fmt.Sprintf("%d-a%d", os.Getpid(), spec.Index), (*exec.Cmd).Start)
	if err != nil {
		fmt.Fprintf(logf, "=== local actuator: start failed: %v\n", err)
		return 0, "", err
	}
	if group.Dir() != "" {
		fmt.Fprintf(logf, "=== local actuator: pid %d runs in %s with %v CPUs\n", cmd.Process.Pid, group.Dir(), spec.CPUs)
	}
	// Reap it if it exits while we live; once we are gone, init does.
	go func() {
		_ = cmd.Wait()
		_ = group.Remove()
	}()
	return cmd.Process.Pid, group.Dir(), nil
}

// Alive checks that pid exists and, where the OS tells (Linux), that its
// command line names dataDir, so a PID the kernel has recycled for an
// unrelated process is not taken for our server.
func (OSProcs) Alive(pid int, dataDir string) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return runsDataDir(pid, dataDir)
}

// Signal sends sig to pid.
func (OSProcs) Signal(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// RemoveCgroup deletes the cgroup at dir. A process that has exited holds
// its cgroup until it is reaped (by Start's goroutine, or by init for a
// node of an earlier run): cgroup.Remove waits that out.
func (OSProcs) RemoveCgroup(dir string) error { return cgroup.Remove(dir) }
