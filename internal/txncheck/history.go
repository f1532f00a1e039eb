package txncheck

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Workload says what the keys of a history hold.
type Workload uint8

const (
	// ListAppend keys hold lists: Append adds a value, Read returns the list.
	ListAppend Workload = iota
	// Register keys hold one value: Write sets it, Read returns it.
	Register
)

func (w Workload) String() string {
	if w == Register {
		return "register"
	}
	return "list-append"
}

// Outcome is how a transaction ended, as its client saw it.
type Outcome uint8

const (
	// OK: it committed.
	OK Outcome = iota
	// Fail: it certainly did not commit.
	Fail
	// Info: unknown (a timeout, a lost answer); it may have committed.
	Info
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Fail:
		return "fail"
	}
	return "info"
}

// Func is what a micro-operation does.
type Func uint8

const (
	Read Func = iota
	Append
	Write
)

// Mop is one micro-operation of a transaction. Written values are
// positive and unique per key across the history; 0 stands for "nothing"
// (an unset register).
type Mop struct {
	F   Func
	Key string
	// Value is what an Append adds or a Write sets; for a Read of a
	// register in a committed transaction, the value read (0: unset).
	Value int
	// List is what a Read of a list returned in a committed transaction.
	List []int
}

func (m Mop) String() string {
	switch m.F {
	case Append:
		return fmt.Sprintf("append %s %d", m.Key, m.Value)
	case Write:
		return fmt.Sprintf("write %s %d", m.Key, m.Value)
	}
	if l := m.List; len(l) > 8 {
		// The tail is what dependencies are about.
		return fmt.Sprintf("read %s [%d values: %d %d … %s]", m.Key, len(l), l[0], l[1], strings.Trim(fmt.Sprint(l[len(l)-4:]), "[]"))
	} else if l != nil {
		return fmt.Sprintf("read %s %v", m.Key, l)
	}
	return fmt.Sprintf("read %s %d", m.Key, m.Value)
}

// Txn is one transaction: what a process asked for, when, and what it saw.
// The reads of a transaction that did not commit carry no results.
type Txn struct {
	Process int
	// Invoke and Complete are offsets from the start of the history;
	// Complete is ignored for an Info transaction (it may take effect at
	// any time after Invoke).
	Invoke, Complete time.Duration
	Outcome          Outcome
	Mops             []Mop
}

func (t Txn) String() string {
	ms := make([]string, len(t.Mops))
	for i, m := range t.Mops {
		ms[i] = m.String()
	}
	return fmt.Sprintf("process %d, %s, %v–%v: %s", t.Process, t.Outcome, t.Invoke.Round(time.Microsecond), t.Complete.Round(time.Microsecond), strings.Join(ms, "; "))
}

// Recorder records a history from concurrent clients.
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	txns  []Txn
}

// NewRecorder starts a history now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Invoke records that process begins a transaction of mops and returns
// its ID for Complete.
func (r *Recorder) Invoke(process int, mops []Mop) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.txns = append(r.txns, Txn{Process: process, Invoke: time.Since(r.start), Outcome: Info, Mops: mops})
	return len(r.txns) - 1
}

// Complete records how transaction id ended and, when it committed, the
// mops with their read results.
func (r *Recorder) Complete(id int, o Outcome, mops []Mop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &r.txns[id]
	t.Complete, t.Outcome = time.Since(r.start), o
	if o == OK {
		t.Mops = mops
	}
}

// History is what was recorded so far; a transaction not completed is
// Info.
func (r *Recorder) History() []Txn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Txn(nil), r.txns...)
}
