package security

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadPolicy reads the calling thread's scheduling policy from
// /proc/thread-self/stat (field 41, counted after the command name's
// closing parenthesis, which may itself hold spaces).
func threadPolicy() (int, error) {
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (the state).
	if len(fields) < 39 {
		return 0, fmt.Errorf("/proc/thread-self/stat has %d fields after the name", len(fields))
	}
	return strconv.Atoi(fields[41-3])
}

// A derivation the budget admits runs on a thread under SCHED_IDLE, and
// only it: the caller's thread keeps the default policy (SCHED_NORMAL); and logins
// derived so still verify.
func TestDerivationsRunAtIdlePriority(t *testing.T) {
	dir, _, _ := testDirectory(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var during int
	var duringErr error
	if err := dir.derivations.do(func() { during, duringErr = threadPolicy() }); err != nil {
		t.Fatal(err)
	}
	if duringErr != nil || during != unix.SCHED_IDLE {
		t.Fatalf("a derivation ran under policy %d (%v), want SCHED_IDLE (%d)", during, duringErr, unix.SCHED_IDLE)
	}
	if after, err := threadPolicy(); err != nil || after != unix.SCHED_NORMAL {
		t.Fatalf("the caller's thread is under policy %d (%v) after the derivation, want SCHED_NORMAL (%d)", after, err, unix.SCHED_NORMAL)
	}
	login(t, dir, "writer", "wpw", "10.0.0.1:1", 0)
	login(t, dir, "reader", "not-rpw", "10.0.0.1:1", wrong)
	login(t, dir, "nobody", "rpw", "10.0.0.1:1", wrong)
}

// A derivation is charged the CPU time of its thread, not its wall time:
// one that waits 100 ms for nothing (as one at idle priority waits while
// the node's requests run) costs a burst of 10 ms nothing, and the next
// login is admitted.
func TestDerivationsChargedTheirCPUTime(t *testing.T) {
	b := newDerivationBudget(LoginConfig{DerivationShare: 0.001, DerivationBurst: 10 * time.Millisecond})
	b.procs = func() int { return 1 }
	for range 2 {
		if err := b.do(func() { time.Sleep(100 * time.Millisecond) }); err != nil {
			t.Fatalf("a derivation that waited without CPU: %v, want it admitted", err)
		}
	}
}
