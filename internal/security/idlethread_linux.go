package security

import (
	"time"

	"golang.org/x/sys/unix"
)

// lowerThread puts the calling thread (pid 0: the caller) under SCHED_IDLE,
// which any thread may ask for itself without privileges.
func lowerThread() error {
	return unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_IDLE}, 0)
}

// threadTime is the calling thread's CPU time (0 if the clock cannot be
// read, which charges nothing: the slots still bound derivations).
func threadTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
