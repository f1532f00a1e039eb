//go:build linux

package scenario

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// lrHog is a CPU hog: a shell busy loop pinned to one CPU, at the default
// niceness, stopped by PID.
type lrHog struct {
	cmd *exec.Cmd
}

// lrStartHog starts a busy loop pinned to cpu. It dies with this process
// (SIGKILL on parent death) if Stop is never called.
func lrStartHog(cpu string) (*lrHog, error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, fmt.Errorf("the CPU hog needs taskset (util-linux): %w", err)
	}
	cmd := exec.Command("taskset", "-c", cpu, "sh", "-c", "while :; do :; done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Pdeathsig fires when the thread that forked the child exits; the Go
	// runtime only retires threads left locked (see internal/launcher).
	runtime.LockOSThread()
	err := cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("start CPU hog: %w", err)
	}
	return &lrHog{cmd: cmd}, nil
}

// Pid is the hog's process ID.
func (h *lrHog) Pid() int { return h.cmd.Process.Pid }

// Stop kills the hog by PID and reaps it.
func (h *lrHog) Stop() {
	if h == nil || h.cmd.Process == nil {
		return
	}
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
}
