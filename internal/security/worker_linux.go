package security

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// selfExe is the node's own binary, even if the file was replaced or
// removed since it started (an upgrade in place): a worker speaks the
// node's protocol.
const selfExe = "/proc/self/exe"

// schedThreads sets the scheduling policy of every thread of a worker.
//
// lower puts them under SCHED_IDLE, the lowest CPU priority of Linux's
// fair scheduler: a thread of it runs only when no other thread of its
// cgroup wants the core (weight 3 against a normal thread's 1024, and a
// waking normal thread always preempts it). Chosen over nice 19 (weight
// 15), which still takes its share beside the node's threads and is
// preempted on wake-up only by the scheduler's usual rule; and a process
// may switch one of its own user's to it unprivileged. raise puts them
// back under SCHED_OTHER (SCHED_NORMAL) at nice 0, the node's own priority; leaving
// SCHED_IDLE takes CAP_SYS_NICE or an RLIMIT_NICE of 20 (a node that has
// neither fails to raise, and its derivations wait as before).
type schedThreads struct{}

func (schedThreads) lower(pid int) error {
	return setThreads(pid, &unix.SchedAttr{Policy: unix.SCHED_IDLE})
}

func (schedThreads) raise(pid int) error {
	return setThreads(pid, &unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: 0})
}

// setThreads sets attr on every thread of process pid. Policies are per
// thread on Linux: the threads that exist are set here, and threads start
// with their creator's policy, so the ones it makes later inherit it.
// Threads started while the list is read are caught by reading it again
// until it has no new one.
func setThreads(pid int, attr *unix.SchedAttr) error {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	set := map[int]bool{}
	for {
		entries, err := os.ReadDir(dir)
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
			if err := unix.SchedSetAttr(tid, attr, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
			set[tid], more = true, true
		}
		if !more {
			return nil
		}
	}
}
