//go:build unix && !linux

package launcher

import (
	"os/exec"
	"syscall"
)

// Without Pdeathsig, servers outlive a launcher that dies without stopping
// them.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func startCmd(cmd *exec.Cmd) error { return cmd.Start() }
