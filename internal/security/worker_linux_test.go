package security

import (
	"testing"
	"time"
)

// A node that could not raise a worker out of SCHED_IDLE leaves its
// workers at normal priority rather than let logins starve on a busy
// machine, and keeps them when a derivation outlasts the grace. (It used
// to raise such a worker at the grace, fail to lower it after and stop
// it: CI, where a derivation took longer than the grace, found the pool
// empty.) The grace passes here before the worker answers.
func TestWorkersNotLoweredWhenTheyCannotBeRaised(t *testing.T) {
	p := newWorkerPool(startWorker, nil, nil)
	p.aging.priority = schedThreads{canRaise: func() bool { return false }}
	p.aging.after = func(_ time.Duration, f func()) func() bool { f(); return func() bool { return false } }
	defer p.stop()
	p.derive(fixedDerivations[0])
	if len(p.idle) != 1 {
		t.Fatalf("%d idle workers after a derivation past the grace, want its worker kept", len(p.idle))
	}
	wantPolicy(t, p.idle[0].cmd.Process.Pid, "0")
}

func TestLeavesIdle(t *testing.T) {
	for _, c := range []struct {
		sysNice, limitKnown bool
		limit               uint64
		want                bool
	}{
		{true, false, 0, true},
		{true, true, 0, true},
		{false, true, 20, true},
		{false, true, 40, true},
		{false, true, 19, false},
		{false, true, 0, false},
		{false, false, 40, false},
	} {
		if got := leavesIdle(c.sysNice, c.limitKnown, c.limit); got != c.want {
			t.Errorf("CAP_SYS_NICE %v, RLIMIT_NICE known %v = %d: %v, want %v", c.sysNice, c.limitKnown, c.limit, got, c.want)
		}
	}
}
