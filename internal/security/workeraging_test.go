package security

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePriority records the raises and lowers asked of it, failing a raise
// with raiseErr and a lower with lowerErr.
type fakePriority struct {
	mu                 sync.Mutex
	calls              []string
	raiseErr, lowerErr error
}

func (f *fakePriority) raise(pid int) error { return f.record("raise", pid, f.raiseErr) }
func (f *fakePriority) lower(pid int) error { return f.record("lower", pid, f.lowerErr) }

func (f *fakePriority) record(what string, pid int, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %d", what, pid))
	return err
}

func (f *fakePriority) got() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, ", ")
}

// timerClock is an afterFunc whose time passes when advance says: a timer
// due by then runs in advance's goroutine, before advance returns.
type timerClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*clockTimer
}

type clockTimer struct {
	at      time.Duration
	f       func()
	stopped bool
}

func (c *timerClock) after(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &clockTimer{at: c.now + d, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

func (c *timerClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	var due []func()
	for _, t := range c.timers {
		if !t.stopped && t.at <= c.now {
			t.stopped = true
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// waiting is a derivation served by a under way: its answer comes when
// answer is sent what it returns.
type waiting struct {
	answer chan error
	done   chan [2]any
}

func serveWaiting(a *aging, pid int) waiting {
	w := waiting{answer: make(chan error), done: make(chan [2]any, 1)}
	started := make(chan struct{})
	go func() {
		reusable, err := a.serve(pid, func() error { close(started); return <-w.answer })
		w.done <- [2]any{reusable, err}
	}()
	<-started
	return w
}

func (w waiting) end(err error) (bool, error) {
	w.answer <- err
	r := <-w.done
	e, _ := r[1].(error)
	return r[0].(bool), e
}

func agingOn(grace time.Duration) (*aging, *fakePriority, *timerClock) {
	f, c := &fakePriority{}, &timerClock{}
	return &aging{priority: f, after: c.after, grace: grace}, f, c
}

// A derivation keeps the lowest priority through its grace; its worker is
// raised once the grace has passed, and lowered after it answers, fit to
// serve again. One that answers within the grace is never raised.
func TestDerivationRaisedAfterGrace(t *testing.T) {
	a, f, clock := agingOn(DefaultDerivationGrace)
	w := serveWaiting(a, 7)
	clock.advance(DefaultDerivationGrace - time.Nanosecond)
	if got := f.got(); got != "" {
		t.Fatalf("within the grace: %q, want the worker left at the lowest priority", got)
	}
	clock.advance(time.Nanosecond)
	if got := f.got(); got != "raise 7" {
		t.Fatalf("at the grace: %q, want the worker raised", got)
	}
	clock.advance(time.Hour)
	if reusable, err := w.end(nil); !reusable || err != nil {
		t.Fatalf("answered: reusable %v, %v", reusable, err)
	}
	if got := f.got(); got != "raise 7, lower 7" {
		t.Fatalf("after the answer: %q, want raised once, then lowered", got)
	}

	a, f, clock = agingOn(DefaultDerivationGrace)
	w = serveWaiting(a, 8)
	clock.advance(DefaultDerivationGrace / 2)
	if reusable, err := w.end(nil); !reusable || err != nil {
		t.Fatalf("answered within the grace: reusable %v, %v", reusable, err)
	}
	clock.advance(time.Hour)
	if got := f.got(); got != "" {
		t.Fatalf("answered within the grace: %q, want nothing raised or lowered", got)
	}
}

// A worker that died cannot be raised: its derivation fails, without a
// lower, and the worker is not served again (the pool tries a new one).
// A raised worker that cannot be lowered is not served again either.
func TestDerivationRaiseOfDeadWorker(t *testing.T) {
	a, f, clock := agingOn(DefaultDerivationGrace)
	f.raiseErr = errors.New("no such process")
	w := serveWaiting(a, 9)
	clock.advance(DefaultDerivationGrace)
	died := errors.New("EOF from the worker")
	if reusable, err := w.end(died); reusable || !errors.Is(err, died) {
		t.Fatalf("dead worker: reusable %v, %v; want its error and the worker dropped", reusable, err)
	}
	if got := f.got(); got != "raise 9" {
		t.Fatalf("dead worker: %q, want one raise tried and no lower", got)
	}

	a, f, clock = agingOn(DefaultDerivationGrace)
	f.lowerErr = errors.New("operation not permitted")
	w = serveWaiting(a, 10)
	clock.advance(DefaultDerivationGrace)
	if reusable, err := w.end(nil); reusable || err != nil {
		t.Fatalf("not lowered: reusable %v, %v; want the key and the worker dropped", reusable, err)
	}
	if got := f.got(); got != "raise 10, lower 10" {
		t.Fatalf("not lowered: %q", got)
	}
}

// The pool lowers each worker it starts before its first request, and
// raises nothing of a derivation that answers within the grace.
func TestPoolAgesItsWorkers(t *testing.T) {
	p := newWorkerPool(startWorker, nil, nil)
	f := &fakePriority{}
	// A clock that never passes the grace, however slow the worker.
	p.aging.priority, p.aging.after = f, (&timerClock{}).after
	defer p.stop()
	r := fixedDerivations[0]
	p.derive(r)
	pid := p.idle[0].cmd.Process.Pid
	if got := f.got(); got != fmt.Sprintf("lower %d", pid) {
		t.Fatalf("first derivation: %q, want the new worker %d lowered before it", got, pid)
	}
}

// Every thread of a worker runs under SCHED_IDLE (5, as /proc says);
// schedThreads raises them all to SCHED_OTHER (0) and lowers them again.
func TestSchedThreadsRaiseAndLower(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the priority is set on Linux only")
	}
	p := newWorkerPool(startWorker, nil, nil)
	defer p.stop()
	p.derive(fixedDerivations[0])
	pid := p.idle[0].cmd.Process.Pid
	wantPolicy(t, pid, "5")
	if err := (schedThreads{canRaise: mayLeaveIdle}).raise(pid); err != nil {
		t.Fatal(err)
	}
	wantPolicy(t, pid, "0")
	if err := (schedThreads{canRaise: mayLeaveIdle}).lower(pid); err != nil {
		t.Fatal(err)
	}
	wantPolicy(t, pid, "5")
}

// wantPolicy expects every thread of process pid under policy, as field
// 41 of /proc/PID/task/TID/stat gives it.
func wantPolicy(t *testing.T, pid int, policy string) {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 2 {
		t.Fatalf("worker %d has %d threads; the runtime starts several", pid, len(tasks))
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		// Fields 3 on follow the command's closing parenthesis.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if got := fields[41-3]; got != policy {
			t.Fatalf("worker %d thread %s: policy %s, want %s", pid, task.Name(), got, policy)
		}
	}
}
