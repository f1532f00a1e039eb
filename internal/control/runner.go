package control

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/placement"
)

// Executor carries out operators: the server through its admin calls, the
// simulator against its model. Execute must not block on the operator's
// work: it calls done exactly once when the operator has ended, with nil
// or why it failed, from any goroutine or later in virtual time.
type Executor interface {
	Execute(op placement.Operator, done func(error))
}

// Checker is implemented by an Executor that can tell an invalid operator
// (one the policy should never have proposed: a target that does not
// exist, a removal below the replication factor) before it starts.
type Checker interface {
	Check(op placement.Operator) error
}

// Clock tells the time; the server passes time.Now, the simulator its
// virtual clock.
type Clock func() time.Time

// Finished is an operator that ended, remembered for RunnerConfig's
// RecentWindow.
type Finished struct {
	Op    placement.Operator
	Ended time.Time
	Err   error
}

// Runner executes operators within RunnerConfig's limits. It is the only
// place decisions become side effects; an operator it cannot start now is
// dropped (the next round decides again). Safe for concurrent use.
type Runner struct {
	cfg   RunnerConfig
	exec  Executor
	clock Clock
	sink  EventSink

	mu       sync.Mutex
	inflight map[uint64][]placement.Operator // by range (a merge also under Other); several only when placement.Together
	toNode   map[uint64]int                  // data-moving operators per target node
	starts   []time.Time                     // start times within the last minute
	recent   []Finished
	stats    RunnerStats
	rate     float64 // migration bandwidth each node may use now, bytes/s
}

// RunnerStats counts what the runner did.
type RunnerStats struct {
	Started, Throttled, Succeeded, Failed int
}

// NewRunner executes through exec; failures are reported to sink.
func NewRunner(cfg RunnerConfig, exec Executor, clock Clock, sink EventSink) *Runner {
	return &Runner{cfg: cfg, exec: exec, clock: clock, sink: sink, rate: cfg.MigrationRate,
		inflight: map[uint64][]placement.Operator{}, toNode: map[uint64]int{}}
}

// SetMigrationRate sets the snapshot bandwidth (bytes/s) each node may use
// from now on: the bandwidth controller's allowance.
func (r *Runner) SetMigrationRate(bytesPerSec float64) {
	r.mu.Lock()
	r.rate = bytesPerSec
	r.mu.Unlock()
}

// MigrationRate is the snapshot bandwidth each node may use now.
func (r *Runner) MigrationRate() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rate
}

// SetConfig changes the limits from the next start on.
func (r *Runner) SetConfig(cfg RunnerConfig) {
	r.mu.Lock()
	r.cfg = cfg
	r.mu.Unlock()
}

// Config returns the limits in force.
func (r *Runner) Config() RunnerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}

// Busy lists the ranges with an operator running, and the operators, in
// range order.
func (r *Runner) Busy() (map[uint64]bool, []placement.Operator) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[uint64]bool, len(r.inflight))
	var ops []placement.Operator
	for id, rops := range r.inflight {
		out[id] = true
		for _, op := range rops {
			if id == op.Range {
				ops = append(ops, op)
			}
		}
	}
	slices.SortFunc(ops, func(a, b placement.Operator) int {
		return cmp.Or(cmp.Compare(a.Range, b.Range), cmp.Compare(a.Target, b.Target))
	})
	return out, ops
}

// Recent lists the operators that ended within RecentWindow, oldest first.
func (r *Runner) Recent() []Finished {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trimRecent(r.clock())
	return slices.Clone(r.recent)
}

// Stats returns the runner's counters.
func (r *Runner) Stats() RunnerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// MovesData reports whether op streams a range's data to its target.
func MovesData(op placement.Operator) bool {
	switch op.Kind {
	case placement.OpAddVoter, placement.OpAddLearner, placement.OpMoveReplica:
		return true
	}
	return false
}

// Paced reports whether op counts against OpsPerMinute. A split that is
// not by load (by size, or at a key space's boundary) does not: the
// Θmax hold keeps writes to a range past its split line waiting for it,
// it moves no data, and hashed inserts bring every range to its line in
// the same wave: at the server's 120 a minute, loading 300,000 records
// into one node at Θmax 2 MiB made 120 splits in 12 s, then none for 48 s
// while every writer waited (docs/benchmarks/partitioning.md). Such
// splits are still bounded by MaxInFlight and the policy's operators per
// round.
func Paced(op placement.Operator) bool {
	return op.Kind != placement.OpSplit || op.SplitByLoad
}

// Start runs op if the limits allow; it reports whether it did. A range
// runs one operator at a time, except adaptive learners added together
// (placement.Together), each counted against the limits. An
// operator the executor's Checker refuses is a policy bug: it is reported
// to the sink and returned as the error, and counts against no limit.
func (r *Runner) Start(op placement.Operator) (bool, error) {
	if c, ok := r.exec.(Checker); ok {
		if err := c.Check(op); err != nil {
			r.sink.Event(Event{Kind: EventPolicyBug, Subject: events.RangeSubject(op.Range), Reason: Describe(op) + ": " + err.Error()})
			return false, err
		}
	}
	now := r.clock()
	r.mu.Lock()
	for len(r.starts) > 0 && now.Sub(r.starts[0]) >= time.Minute {
		r.starts = r.starts[1:]
	}
	paced := Paced(op)
	if r.running() >= r.cfg.MaxInFlight || paced && len(r.starts) >= r.cfg.OpsPerMinute ||
		!r.free(op) || MovesData(op) && r.toNode[op.Target] >= r.cfg.MaxSnapshotsPerNode {
		r.stats.Throttled++
		r.mu.Unlock()
		return false, nil
	}
	r.inflight[op.Range] = append(r.inflight[op.Range], op)
	if op.Kind == placement.OpMerge {
		r.inflight[op.Other] = append(r.inflight[op.Other], op)
	}
	if MovesData(op) {
		r.toNode[op.Target]++
	}
	if paced {
		r.starts = append(r.starts, now)
	}
	r.stats.Started++
	r.mu.Unlock()

	var once sync.Once
	r.exec.Execute(op, func(err error) { once.Do(func() { r.ended(op, err) }) })
	return true, nil
}

// ended releases op's slots and remembers it.
func (r *Runner) ended(op placement.Operator, err error) {
	now := r.clock()
	r.mu.Lock()
	r.release(op.Range, op)
	if op.Kind == placement.OpMerge {
		r.release(op.Other, op)
	}
	if MovesData(op) {
		r.toNode[op.Target]--
	}
	r.recent = append(r.recent, Finished{Op: op, Ended: now, Err: err})
	r.trimRecent(now)
	if err != nil {
		r.stats.Failed++
	} else {
		r.stats.Succeeded++
	}
	r.mu.Unlock()
	if err != nil && r.sink != nil {
		r.sink.Event(Event{Kind: "operator-failed", Subject: events.RangeSubject(op.Range),
			Reason: Describe(op) + " failed: " + err.Error()})
	}
}

func (r *Runner) trimRecent(now time.Time) {
	i := 0
	for i < len(r.recent) && now.Sub(r.recent[i].Ended) > r.cfg.RecentWindow {
		i++
	}
	r.recent = r.recent[i:]
}

// running counts the operators in flight, a merge under both its ranges
// (caller holds mu).
func (r *Runner) running() int {
	n := 0
	for _, ops := range r.inflight {
		n += len(ops)
	}
	return n
}

// free reports whether op's ranges have no operator in flight that op
// may not run beside (caller holds mu).
func (r *Runner) free(op placement.Operator) bool {
	for _, id := range []uint64{op.Range, op.Other} {
		for _, cur := range r.inflight[id] {
			if id != 0 && !placement.Together(cur, op) {
				return false
			}
		}
	}
	return true
}

// release drops op from range id's operators in flight (caller holds mu).
func (r *Runner) release(id uint64, op placement.Operator) {
	rest := slices.DeleteFunc(r.inflight[id], func(cur placement.Operator) bool {
		return cur.Kind == op.Kind && cur.Range == op.Range && cur.Target == op.Target && cur.Source == op.Source
	})
	if len(rest) == 0 {
		delete(r.inflight, id)
		return
	}
	r.inflight[id] = rest
}
