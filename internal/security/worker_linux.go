package security

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// selfExe is the node's own binary, even if the file was replaced or
// removed since it started (an upgrade in place): a worker speaks the
// node's protocol.
const selfExe = "/proc/self/exe"

// lowerPriority puts every thread of the process under SCHED_IDLE, the
// lowest CPU priority of Linux's fair scheduler: a thread of it runs only
// when no other thread of its cgroup wants the core (weight 3 against a
// normal thread's 1024, and a waking normal thread always preempts it).
// Chosen over nice 19 (weight 15), which still takes its share beside the
// node's threads and is preempted on wake-up only by the scheduler's usual
// rule; and an unprivileged process may switch to it. Policies are per
// thread on Linux: the runtime's threads that exist are set here, and
// threads start with their creator's policy, so the ones it makes later
// inherit it. Threads started while the list is read are caught by reading
// it again until it has no new one.
func lowerPriority() error {
	idle := unix.SchedAttr{Policy: unix.SCHED_IDLE}
	set := map[int]bool{}
	for {
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		more := false
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || set[tid] {
				continue
			}
			// A thread that exited meanwhile (ESRCH) needs nothing.
			if err := unix.SchedSetAttr(tid, &idle, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
			set[tid], more = true, true
		}
		if !more {
			return nil
		}
	}
}
