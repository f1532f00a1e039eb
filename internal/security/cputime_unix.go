//go:build unix

package security

import (
	"syscall"
	"time"
)

// processCPU is the CPU time, user and system, the process has used so
// far, and whether the kernel told it.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
