package security

import (
	"log"
	"sync"
	"time"
)

// A derivation worker runs under SCHED_IDLE (worker_linux.go) so that a
// flood of logins costs the node's requests little. But SCHED_IDLE
// starves: a thread of it runs only when no other thread wants the core,
// so on a machine kept busy by other processes, or by the node's own
// requests, a legitimate login's derivation never ran and the login timed
// out (issue 35: every password call of TestSecurityTable at load ~20
// ended DeadlineExceeded after 5 s). So a derivation ages: it keeps
// SCHED_IDLE while it waits no longer than the grace (a few derivations'
// CPU time, which it needs anyway on an idle machine), after which the
// worker serving it is raised to normal scheduling until it answers, and
// lowered again before it serves another. What a flood may spend is still
// bounded by the derivation budget (its slots and CPU time a second,
// derivations.go), not by the priority: docs/security.md, "What is left
// of a flood's cost".

// DefaultDerivationGrace is how long a derivation waits at the lowest
// priority before its worker is raised, unless LoginConfig says: three
// times the ~50 ms of CPU time an Argon2id derivation takes, so that on a
// machine with a core to spare it ends before the grace does.
const DefaultDerivationGrace = 150 * time.Millisecond

// threadPriority sets the CPU priority of every thread of a worker
// process: raise to the node's (normal scheduling), lower to the lowest.
// The pool owns this seam; tests put a fake in its place.
type threadPriority interface {
	raise(pid int) error
	lower(pid int) error
}

// afterFunc calls f in its own goroutine once d has passed, unless the
// returned stop is called first (stop reports whether it stopped f), as
// time.AfterFunc; tests inject a clock they advance.
type afterFunc func(d time.Duration, f func()) (stop func() bool)

func wallAfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// aging raises a worker whose derivation waited out the grace.
type aging struct {
	priority threadPriority
	after    afterFunc

	mu    sync.Mutex
	grace time.Duration
	// warned says a failed raise of a live worker was logged.
	warned bool
}

// serve waits for a worker's answer (answer returns once it has it, or
// the worker failed), raising the worker pid if the grace passes first.
// It returns whether the worker is fit to serve again, and answer's
// error: not fit if answer failed, or if a raised worker could not be
// lowered (at normal priority it would cost the node a flood's
// derivations at the weight of its requests).
func (a *aging) serve(pid int, answer func() error) (reusable bool, err error) {
	a.mu.Lock()
	grace := a.grace
	a.mu.Unlock()
	var mu sync.Mutex
	answered, raised := false, false
	stop := a.after(grace, func() {
		mu.Lock()
		defer mu.Unlock()
		if answered {
			return
		}
		if err := a.priority.raise(pid); err != nil {
			// A worker that died is found out by answer, which fails and
			// has the derivation tried on a new one; one that lives but
			// could not be raised derives at the lowest priority: said
			// once. (A node without the privilege to raise never lowers
			// its workers: worker_linux.go.)
			a.warnOnce(pid, err)
			return
		}
		raised = true
	})
	err = answer()
	stop()
	mu.Lock()
	answered = true
	wasRaised := raised
	mu.Unlock()
	if err != nil {
		return false, err
	}
	if wasRaised {
		if lerr := a.priority.lower(pid); lerr != nil {
			log.Printf("security: derivation worker %d stopped: it could not be lowered again after its derivation was raised: %v", pid, lerr)
			return false, nil
		}
	}
	return true, nil
}

func (a *aging) warnOnce(pid int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.warned {
		a.warned = true
		log.Printf("security: a derivation waiting beyond its grace stays at the lowest priority (worker %d): %v", pid, err)
	}
}

// setGrace sets the grace (LoginConfig.DerivationGrace).
func (a *aging) setGrace(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.grace = d
}
