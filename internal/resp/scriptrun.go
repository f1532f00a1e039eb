package resp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// A script's bounds. gopher-lua, given a context, asks for its Done before
// every instruction it executes; scriptRun is that context. It counts the
// instructions, and every checkEvery of them reads the clock (Config.Now,
// which tests replace) against the script's time limit
// (Config.ScriptTimeLimit) and asks whether the command's own context has
// ended (RequestTimeout, the connection or the server closing). Once one
// has, or SCRIPT KILL stopped it, Done is closed for good: the VM raises
// an error at the next instruction, and again at each one after, so a
// script that catches the error with pcall is stopped at the next
// instruction outside it. A stopped script's transaction is rolled back:
// nothing it wrote is applied.

// checkEvery is how many instructions run between two looks at the clock
// and the command's context: a few microseconds of Lua.
const checkEvery = 1024

var (
	errScriptTimeout = errors.New("script ran past its time limit")
	errScriptKilled  = errors.New("script killed by SCRIPT KILL")
)

// scriptRun is one attempt of one script as the Lua VM's context.
type scriptRun struct {
	parent   context.Context // the command's
	now      func() time.Time
	deadline time.Time
	steps    uint64
	// why is set once, by the VM's goroutine or by SCRIPT KILL: the
	// reason the script stopped.
	why atomic.Pointer[error]
}

func newScriptRun(parent context.Context, now func() time.Time, limit time.Duration) *scriptRun {
	return &scriptRun{parent: parent, now: now, deadline: now().Add(limit)}
}

// stop ends the script with err, unless it already ended.
func (r *scriptRun) stop(err error) { r.why.CompareAndSwap(nil, &err) }

// stopped is why the script ended, or nil.
func (r *scriptRun) stopped() error {
	if p := r.why.Load(); p != nil {
		return *p
	}
	return nil
}

// Done counts one instruction (see above). A nil channel never fires, so
// the VM's select takes its default and runs the instruction.
func (r *scriptRun) Done() <-chan struct{} {
	r.steps++
	if r.steps%checkEvery == 0 {
		r.check()
	}
	if r.why.Load() != nil {
		return closedChan
	}
	return nil
}

// check stops the script past its deadline or its command's end.
func (r *scriptRun) check() {
	if err := r.parent.Err(); err != nil {
		r.stop(err)
	} else if !r.now().Before(r.deadline) {
		r.stop(errScriptTimeout)
	}
}

func (r *scriptRun) Err() error                  { return r.stopped() }
func (r *scriptRun) Deadline() (time.Time, bool) { return r.parent.Deadline() }
func (r *scriptRun) Value(key any) any           { return r.parent.Value(key) }

// runningScripts are the scripts running on a node, for SCRIPT KILL.
type runningScripts struct {
	mu  sync.Mutex
	set map[*scriptRun]struct{}
}

func (s *runningScripts) add(r *scriptRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil {
		s.set = map[*scriptRun]struct{}{}
	}
	s.set[r] = struct{}{}
}

func (s *runningScripts) remove(r *scriptRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, r)
}

// kill stops every running script and reports whether there was one.
func (s *runningScripts) kill() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.set {
		r.stop(errScriptKilled)
	}
	return len(s.set) > 0
}
