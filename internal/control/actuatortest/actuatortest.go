// Package actuatortest provides an in-memory control.Actuator that records
// its calls and fails or hangs on demand, for tests of the code that drives
// actuators.
package actuatortest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tidekv/tidekv/internal/control"
)

// ErrInjected is the error an injected failure returns.
var ErrInjected = errors.New("actuatortest: injected failure")

// Op names an Actuator method in a recorded Call.
type Op string

// The recorded operations.
const (
	OpScaleOut Op = "scale-out"
	OpVictim   Op = "victim"
	OpRemove   Op = "remove"
)

// Call is one recorded call and its outcome.
type Call struct {
	Op     Op
	Count  int            // ScaleOut
	Join   []string       // ScaleOut
	Member control.Member // Remove (the member asked for), Victim (the pick)
	Err    error          // what the call returned
}

// Fake is an in-memory Actuator. The zero value is not usable; call New.
// Its methods are safe for concurrent use.
type Fake struct {
	name string

	mu                 sync.Mutex
	calls              []Call
	failScaleOut       int
	failRemove         int
	failVictim         int
	hangScaleOut       bool
	hangRemove         bool
	onScaleOut         func(count int, join []string)
	onRemove           func(m control.Member)
	scaledOut, removed int
}

var _ control.Actuator = (*Fake)(nil)

// New returns a Fake whose Name is name.
func New(name string) *Fake { return &Fake{name: name} }

// Name returns the name given to New.
func (f *Fake) Name() string { return f.name }

// FailScaleOut makes the next n ScaleOut calls return ErrInjected.
func (f *Fake) FailScaleOut(n int) { f.set(func() { f.failScaleOut = n }) }

// FailRemove makes the next n Remove calls return ErrInjected.
func (f *Fake) FailRemove(n int) { f.set(func() { f.failRemove = n }) }

// FailVictim makes the next n Victim calls return ErrInjected.
func (f *Fake) FailVictim(n int) { f.set(func() { f.failVictim = n }) }

// HangScaleOut makes ScaleOut block until its context ends (and return the
// context's error) while on is true.
func (f *Fake) HangScaleOut(on bool) { f.set(func() { f.hangScaleOut = on }) }

// HangRemove makes Remove block until its context ends while on is true.
func (f *Fake) HangRemove(on bool) { f.set(func() { f.hangRemove = on }) }

// OnScaleOut sets a hook run by every successful ScaleOut, e.g. to add
// nodes to a model cluster.
func (f *Fake) OnScaleOut(fn func(count int, join []string)) { f.set(func() { f.onScaleOut = fn }) }

// OnRemove sets a hook run by every successful Remove.
func (f *Fake) OnRemove(fn func(m control.Member)) { f.set(func() { f.onRemove = fn }) }

func (f *Fake) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// Calls returns a copy of the calls so far, oldest first.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// ScaledOut returns the nodes requested by successful ScaleOut calls.
func (f *Fake) ScaledOut() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scaledOut
}

// Removed returns the number of successful Remove calls.
func (f *Fake) Removed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.removed
}

// ScaleOut records the call and, unless a failure is injected, accepts it.
func (f *Fake) ScaleOut(ctx context.Context, count int, join []string) (string, error) {
	c := Call{Op: OpScaleOut, Count: count, Join: slices.Clone(join)}
	err := f.outcome(ctx, &f.failScaleOut, &f.hangScaleOut)
	if err == nil && count < 1 {
		err = fmt.Errorf("actuatortest: scale-out count must be >= 1, got %d", count)
	}
	f.mu.Lock()
	c.Err = err
	f.calls = append(f.calls, c)
	hook := f.onScaleOut
	if err == nil {
		f.scaledOut += count
	}
	f.mu.Unlock()
	if err != nil {
		return "", err
	}
	if hook != nil {
		hook(count, join)
	}
	return fmt.Sprintf("%s: requested %d node(s)", f.name, count), nil
}

// Victim picks the member with the highest ID.
func (f *Fake) Victim(members []control.Member) (control.Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := Call{Op: OpVictim}
	switch {
	case f.failVictim > 0:
		f.failVictim--
		c.Err = ErrInjected
	case len(members) == 0:
		c.Err = errors.New("actuatortest: no members")
	default:
		c.Member = slices.MaxFunc(members, func(a, b control.Member) int { return cmp.Compare(a.ID, b.ID) })
	}
	f.calls = append(f.calls, c)
	return c.Member, c.Err
}

// Remove records the call and, unless a failure is injected, accepts it.
func (f *Fake) Remove(ctx context.Context, m control.Member) (string, error) {
	err := f.outcome(ctx, &f.failRemove, &f.hangRemove)
	f.mu.Lock()
	f.calls = append(f.calls, Call{Op: OpRemove, Member: m, Err: err})
	hook := f.onRemove
	if err == nil {
		f.removed++
	}
	f.mu.Unlock()
	if err != nil {
		return "", err
	}
	if hook != nil {
		hook(m)
	}
	return fmt.Sprintf("%s: removed node %d (%s)", f.name, m.ID, m.Addr), nil
}

// outcome consumes one injected failure, or hangs until ctx ends if asked
// to; nil means the call goes through.
func (f *Fake) outcome(ctx context.Context, fail *int, hang *bool) error {
	f.mu.Lock()
	if *fail > 0 {
		*fail--
		f.mu.Unlock()
		return ErrInjected
	}
	h := *hang
	f.mu.Unlock()
	if h {
		<-ctx.Done()
		return ctx.Err()
	}
	return ctx.Err()
}
