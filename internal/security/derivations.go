package security

import (
	"errors"
	"fmt"
	"math"
	"runtime"
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
	// DerivationBurst is the CPU time, in (0, 1m], that derivations may
	// spend at once beyond the share, saved while they spend less: the
	// distinct first logins after a restart, or a client logging in as
	// several users one after another, are admitted, and a flood spends
	// the burst once and then the share.
	DerivationBurst time.Duration
	// RefusalHold, in [0, 10s], is how long a login refused unchecked
	// (during a back-off, or with the budget spent) waits before its
	// answer, on a timer, not a CPU. An attacker waits for each answer,
	// so answering at once invited ever more attempts: in a flood of 64
	// addresses the node received 125k a window and spent its CPU
	// receiving and refusing them (docs/benchmarks/security.md). 0
	// answers at once.
	RefusalHold time.Duration
	// DerivationGrace, in [0, 5s], is how long a derivation waits at the
	// lowest CPU priority (SCHED_IDLE) before its worker is raised to the
	// node's until it answers (workeraging.go): at SCHED_IDLE alone a busy
	// node never ran a login's derivation. 0 raises it at once. Beyond 5 s
	// a client's call (5 s in TideKV's clients) would end before a
	// starved login was raised.
	DerivationGrace time.Duration
}

// DefaultLoginConfig returns the documented default: a tenth of the
// node's CPUs and a burst of one second's CPU time. On a node of 2 CPUs
// about 40 new logins of 30 ms each one after another (the burst and what
// refills meanwhile), then about 6 a second; a derivation raised from the
// lowest priority after DefaultDerivationGrace.
func DefaultLoginConfig() LoginConfig {
	return LoginConfig{DerivationShare: 0.1, DerivationBurst: time.Second, RefusalHold: time.Second, DerivationGrace: DefaultDerivationGrace}
}

// Validate checks the bounds.
func (c LoginConfig) Validate() error {
	// Below a thousandth one derivation's debt takes minutes to repay
	// (30 ms at a thousandth of one CPU: 30 s): no login would be answered.
	if !(c.DerivationShare >= 0.001 && c.DerivationShare <= 1) {
		return fmt.Errorf("security: the login derivation share must be a share of the node's CPUs in [0.001, 1], not %v", c.DerivationShare)
	}
	// Without a burst no login would start; beyond a minute's CPU time a
	// flood would take the node's CPUs for a minute before the share held.
	if c.DerivationBurst <= 0 || c.DerivationBurst > time.Minute {
		return fmt.Errorf("security: the login derivation burst must be CPU time in (0, 1m], not %v", c.DerivationBurst)
	}
	if c.RefusalHold < 0 || c.RefusalHold > 10*time.Second {
		return fmt.Errorf("security: the hold of a refused login must be in [0, 10s], not %v", c.RefusalHold)
	}
	if c.DerivationGrace < 0 || c.DerivationGrace > 5*time.Second {
		return fmt.Errorf("security: the grace of a login derivation at the lowest priority must be in [0, 5s], not %v", c.DerivationGrace)
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
// CPUs with a CPU-time token bucket: credit, in CPU time, refills at
// budget = share × CPUs seconds a second up to the burst. A derivation
// starts while the credit is not negative and one of max(1, floor(CPUs))
// slots is free (a burst may keep every core busy for a moment, so that
// distinct users logging in at the same instant, as after a restart, are
// not refused; the credit bounds the average), and the time it took is
// charged after it, so the credit
// may go below zero: a derivation's cost is not known before it ends, and
// one admitted with a little credit is charged in full. A login that finds
// the credit spent or every slot busy is refused, not queued: a queue would
// hold every attacker's attempt and its 19 MiB, and make a real user's
// login wait behind them. Over any stretch of time derivations take at most
// the burst, plus budget × its length, plus the derivations under way when
// the credit ran out.
//
// The node's CPUs are the fewer of GOMAXPROCS and its cgroup's quota: the
// Go runtime gives a node of one CPU's quota two Ps.
type derivationBudget struct {
	share float64
	burst time.Duration
	// procs is GOMAXPROCS; quota the node's CPU quota (0: none). Both are
	// read again once cpusEvery has passed: a sized node is moved into
	// its cgroup after it starts.
	procs func() int
	quota func() float64
	// now times derivations and refills on the wall clock (not a
	// directory's injected one): the time is the core's. A derivation is
	// charged the lesser of its wall time and the CPU time it reports
	// (its worker's, exact; or, derived in the node's process, the
	// process's over it, which is at least its own): wall time alone
	// charged a derivation for the time other processes held the cores,
	// and on a machine at load 30 six logins one after another spent the
	// 1 s burst.
	now func() time.Time

	mu   sync.Mutex
	busy int
	// credit is the CPU time left, in nanoseconds, as of creditAt (zero:
	// not refilled yet, the credit the full burst); a float, so that
	// refills of a few nanoseconds' worth add up.
	credit   float64
	creditAt time.Time
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

// newDerivationBudget returns a budget of c, its credit full.
func newDerivationBudget(c LoginConfig) *derivationBudget {
	return &derivationBudget{share: c.DerivationShare, burst: c.DerivationBurst, credit: float64(c.DerivationBurst),
		procs: func() int { return runtime.GOMAXPROCS(0) }, quota: func() float64 { return 0 }, now: time.Now}
}

// do runs derive if the budget admits it, else refuses with
// *LoginBusyError; derive returns the CPU time it took, if known, and is
// charged after it the lesser of that and its wall time (its wall time if
// the CPU time is not known).
func (b *derivationBudget) do(derive func() (cpu time.Duration, known bool)) error {
	if err := b.take(b.now()); err != nil {
		return err
	}
	start := b.now()
	cpu, known := derive()
	end := b.now()
	spent := end.Sub(start)
	if known {
		spent = min(spent, cpu)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.busy--
	b.refill(end)
	b.credit -= float64(spent)
	return nil
}

// take claims a slot, or says how long until the credit is not negative
// (0 when only the slots are busy: one frees within a derivation's time,
// which the second RetryAfter asks at least covers).
func (b *derivationBudget) take(now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.readCPUs(now)
	b.refill(now)
	switch {
	case b.credit < 0:
		return &LoginBusyError{After: time.Duration(math.Ceil(-b.credit / b.rate()))}
	case b.busy >= max(1, int(b.cpus)):
		return &LoginBusyError{}
	}
	b.busy++
	return nil
}

// readCPUs reads the node's CPUs again if cpusEvery has passed.
func (b *derivationBudget) readCPUs(now time.Time) {
	if b.cpusAt.IsZero() || now.Sub(b.cpusAt) >= cpusEvery {
		b.cpus, b.cpusAt = float64(b.procs()), now
		if q := b.quota(); q > 0 && q < b.cpus {
			b.cpus = q
		}
	}
}

// cores is the budget in CPUs, the node's read now if they are old.
func (b *derivationBudget) cores() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.readCPUs(b.now())
	return b.rate()
}

// rate is the budget in cores: the CPU time credited a second.
func (b *derivationBudget) rate() float64 { return b.share * b.cpus }

// refill credits the time since the last refill, up to the burst.
func (b *derivationBudget) refill(now time.Time) {
	if !b.creditAt.IsZero() {
		b.credit = min(float64(b.burst), b.credit+float64(now.Sub(b.creditAt))*b.rate())
	}
	b.creditAt = now
}
