package security

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"

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
// back under SCHED_OTHER (SCHED_NORMAL) at nice 0, the node's own priority.
// Leaving SCHED_IDLE takes CAP_SYS_NICE or an RLIMIT_NICE of 20, so a node
// that has neither does not lower its workers at all: a worker it could
// not raise would starve on a busy machine (logins time out), and the
// flood's bound is the derivation budget's either way.
type schedThreads struct {
	// canRaise says whether this process may raise a thread out of
	// SCHED_IDLE (mayLeaveIdle; tests say no).
	canRaise func() bool
}

func (s schedThreads) lower(pid int) error {
	if !s.canRaise() {
		return errors.New("not lowered: leaving the lowest priority again takes CAP_SYS_NICE or an RLIMIT_NICE of 20, which the node has not")
	}
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

// mayLeaveIdle says whether this process may move a thread from SCHED_IDLE
// back to normal scheduling, as its capabilities and RLIMIT_NICE stand at
// the first call (neither changes while a node runs).
var mayLeaveIdle = sync.OnceValue(func() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	var limit unix.Rlimit
	capErr := unix.Capget(&hdr, &caps[0])
	limitErr := unix.Getrlimit(unix.RLIMIT_NICE, &limit)
	return leavesIdle(capErr == nil && caps[0].Effective&(1<<unix.CAP_SYS_NICE) != 0, limitErr == nil, limit.Cur)
})

// leavesIdle is mayLeaveIdle's rule: CAP_SYS_NICE, or an RLIMIT_NICE
// allowing nice 0 (the limit is 20 − the lowest nice value allowed).
func leavesIdle(sysNice, limitKnown bool, niceLimit uint64) bool {
	return sysNice || (limitKnown && niceLimit >= 20)
}
