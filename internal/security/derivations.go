package security

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// LoginConfig bounds what logins cost the node before their password
// checks out (docs/security.md, "Failed logins are bounded").
type LoginConfig struct {
	// DerivationShare is the share of the node's CPUs, in (0, 1], that
	// the password derivations of logins not yet verified may keep busy.
	// A login that finds it spent is refused at once (*LoginBusyError)
	// rather than queued: a flood of bad logins then costs the node this
	// share and no more, and its logged-in users' requests (checked
	// against the cache of verified passwords, without a derivation),
	// client certificates and sessions keep the rest.
	DerivationShare float64
}

// DefaultLoginConfig returns the documented default: a tenth of the
// node's CPUs, on a node of 2 CPUs a slot that derives a fifth of the
// time (about 6 logins a second at 30 ms each).
func DefaultLoginConfig() LoginConfig { return LoginConfig{DerivationShare: 0.1} }

// Validate checks the bounds.
func (c LoginConfig) Validate() error {
	// Below a thousandth a slot would rest thousands of times as long as
	// a derivation: no login would be answered.
	if !(c.DerivationShare >= 0.001 && c.DerivationShare <= 1) {
		return fmt.Errorf("security: the login derivation share must be a share of the node's CPUs in [0.001, 1], not %v", c.DerivationShare)
	}
	return nil
}

// LoginBusyError refuses a login, before its password is checked, because
// the node's derivation budget is spent: nothing is wrong with the login,
// and it may be retried after RetryAfter. gRPC answers it with
// ResourceExhausted, Redis with "ERR too many login attempts, retry
// later", HTTP with 429 and Retry-After.
type LoginBusyError struct{ After time.Duration }

func (e *LoginBusyError) Error() string { return "too many login attempts, retry later" }

// RetryAfter is the wait, rounded up to whole seconds, at least one.
func (e *LoginBusyError) RetryAfter() time.Duration { return max(time.Second, wholeSeconds(e.After)) }

// IsLoginBusy reports whether err refuses a login for want of derivation
// budget.
func IsLoginBusy(err error) bool {
	var busy *LoginBusyError
	return errors.As(err, &busy)
}

// derivationBudget keeps password derivations to a share of the node's
// CPUs: budget = share × CPUs cores' worth. It derives max(1,
// floor(budget)) hashes at once, and where that is more than the budget
// (a budget under one core: the default's on any node below 10 CPUs),
// each slot rests after its derivation for long enough that the slots are
// busy budget/slots of the time: at a budget of 0.2, four times as long as
// the derivation took. A derivation that finds no free slot is refused,
// not queued: a queue would hold every attacker's attempt and its 19 MiB,
// and make a real user's login wait behind them.
//
// The node's CPUs are the fewer of GOMAXPROCS and its cgroup's quota: the
// Go runtime gives a node of one CPU's quota two Ps.
type derivationBudget struct {
	share float64
	// procs is GOMAXPROCS; quota the node's CPU quota (0: none). Both are
	// read again once cpusEvery has passed: a sized node is moved into
	// its cgroup after it starts.
	procs func() int
	quota func() float64
	// now times derivations and rests on the wall clock (not a
	// directory's injected one): the time is the core's.
	now func() time.Time

	mu   sync.Mutex
	busy int
	// resting holds when each resting slot is free again.
	resting []time.Time
	// cpus is the node's CPUs as read at cpusAt.
	cpus   float64
	cpusAt time.Time
}

// cpusEvery is how often a budget reads the node's CPUs at most. Reading
// the quota opens cgroup files: done at every login, a flood's refused
// logins spent more of the node's CPU on it (58% in a profile of
// `tidekv bench scenario loginflood`) than the budget kept from
// derivations.
const cpusEvery = time.Second

func newDerivationBudget(c LoginConfig) *derivationBudget {
	return &derivationBudget{share: c.DerivationShare, procs: func() int { return runtime.GOMAXPROCS(0) },
		quota: func() float64 { return 0 }, now: time.Now}
}

// do runs derive if a slot is free, else refuses with *LoginBusyError.
func (b *derivationBudget) do(derive func()) error {
	budget, slots, err := b.take(b.now())
	if err != nil {
		return err
	}
	start := b.now()
	derive()
	end := b.now()
	rest := restAfter(end.Sub(start), budget, slots)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.busy--
	if rest > 0 {
		b.resting = append(b.resting, end.Add(rest))
	}
	return nil
}

// take claims a slot, or says how long until one may be free; it returns
// the budget in cores and its slots.
func (b *derivationBudget) take(now time.Time) (budget float64, slots int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cpusAt.IsZero() || now.Sub(b.cpusAt) >= cpusEvery {
		b.cpus, b.cpusAt = float64(b.procs()), now
		if q := b.quota(); q > 0 && q < b.cpus {
			b.cpus = q
		}
	}
	budget = b.share * b.cpus
	slots = max(1, int(budget))
	b.resting = slices.DeleteFunc(b.resting, func(t time.Time) bool { return !t.After(now) })
	if b.busy+len(b.resting) < slots {
		b.busy++
		return budget, slots, nil
	}
	// A slot deriving frees within a derivation's time, which the second
	// RetryAfter asks at least covers.
	var wait time.Duration
	if len(b.resting) > 0 {
		wait = slices.MinFunc(b.resting, time.Time.Compare).Sub(now)
	}
	return budget, slots, &LoginBusyError{After: wait}
}

// restAfter is how long a slot stays taken after a derivation that took
// spent, so that slots of them keep at most budget cores busy.
func restAfter(spent time.Duration, budget float64, slots int) time.Duration {
	duty := min(1, budget/float64(slots))
	return time.Duration(float64(spent) * (1/duty - 1)).Round(time.Microsecond)
}
