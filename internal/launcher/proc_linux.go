package launcher

import (
	"os/exec"
	"runtime"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// startCmd starts cmd from a locked OS thread: Linux delivers Pdeathsig when
// the *thread* that forked the child exits, and the Go runtime only ever
// retires threads that a goroutine left locked. Unlocking afterwards returns
// the thread to the pool, where it lives as long as the process.
func startCmd(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}
