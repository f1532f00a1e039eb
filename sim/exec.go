package sim

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/placement"
)

// flight is an operator in progress.
type flight struct {
	op      placement.Operator
	started time.Time
	// snapshot: the operator streams the range's data to op.Target from
	// the leaseholder; remaining bytes are left to stream, then wait.
	snapshot  bool
	size      float64
	remaining float64
	wait      time.Duration
	rate      float64     // bytes/s this tick
	done      func(error) // tells the control loop's runner it ended
}

func (f *flight) instant() bool { return !f.snapshot && f.wait <= 0 }

// OpRecord is an operator that ended: applied, or failed with Err.
type OpRecord struct {
	Started, Ended time.Duration
	Op             placement.Operator
	Err            string
}

// simExecutor carries out the control loop's operators on the model. Its
// Check refuses invalid operators (policy bugs); a valid one becomes a
// flight that takes virtual time and applies when it completes.
type simExecutor struct{ s *Sim }

func (x simExecutor) Check(op placement.Operator) error { return x.s.validate(op) }

func (x simExecutor) Execute(op placement.Operator, done func(error)) {
	s := x.s
	f := s.newFlight(op)
	f.done = done
	s.total.Started++
	if f.snapshot {
		if r := s.byID[op.Range]; r.lease == 0 || !s.up(r.lease) {
			s.ended(f, errors.New("no leaseholder to send the snapshot"))
			return
		}
	}
	s.flights = append(s.flights, f)
	if f.instant() {
		s.finish(f, nil)
	}
}

func (s *Sim) newFlight(op placement.Operator) *flight {
	f := &flight{op: op, started: s.clock.Now()}
	r := s.byID[op.Range]
	switch op.Kind {
	case placement.OpAddVoter, placement.OpAddLearner, placement.OpMoveReplica:
		f.wait = s.opts.SnapshotOverhead
		if _, ok := r.has(op.Target); !ok { // a learner there is promoted: no data to send
			f.snapshot, f.size, f.remaining = true, r.bytes, r.bytes
		}
	case placement.OpMerge:
		f.wait = s.opts.MergeDuration
	}
	return f
}

// validate returns why op is invalid (a policy bug) on the model, or nil.
// The control loop itself refuses a second operator for a range in one
// plan and one for a busy range.
func (s *Sim) validate(op placement.Operator) error {
	r := s.byID[op.Range]
	if r == nil {
		return fmt.Errorf("no range %d", op.Range)
	}
	liveTarget := func() error {
		n := s.node(op.Target)
		switch {
		case op.Target == 0 || n == nil || n.gone:
			return fmt.Errorf("unknown target node %d", op.Target)
		case n.state != placement.NodeLive:
			return fmt.Errorf("target node %d is %s", op.Target, n.state)
		}
		return nil
	}
	source := func() (placement.Replica, error) {
		rep, ok := r.has(op.Source)
		if !ok {
			return rep, fmt.Errorf("node %d holds no replica of range %d", op.Source, op.Range)
		}
		if n := s.node(op.Source); n != nil && n.state == placement.NodeSuspect {
			return rep, fmt.Errorf("source node %d is suspect (nothing moves to or from it yet)", op.Source)
		}
		return rep, nil
	}
	switch op.Kind {
	case placement.OpAddVoter:
		if err := liveTarget(); err != nil {
			return err
		}
		if rep, ok := r.has(op.Target); ok && rep.Type == placement.Voter {
			return fmt.Errorf("node %d already holds a voter", op.Target)
		}
	case placement.OpAddLearner:
		if err := liveTarget(); err != nil {
			return err
		}
		if _, ok := r.has(op.Target); ok {
			return fmt.Errorf("node %d already holds a replica", op.Target)
		}
	case placement.OpRemoveReplica:
		rep, err := source()
		if err != nil {
			return err
		}
		if v := len(r.voters()); rep.Type == placement.Voter && v-1 < s.rf {
			return fmt.Errorf("would leave %d voters, below replication factor %d", v-1, s.rf)
		}
	case placement.OpMoveReplica:
		if _, err := source(); err != nil {
			return err
		}
		if err := liveTarget(); err != nil {
			return err
		}
		if rep, ok := r.has(op.Target); ok && rep.Type == placement.Voter {
			return fmt.Errorf("node %d already holds a voter", op.Target)
		}
	case placement.OpTransferLease:
		if err := liveTarget(); err != nil {
			return err
		}
		if rep, ok := r.has(op.Target); !ok || rep.Type != placement.Voter {
			return fmt.Errorf("node %d holds no voter of range %d", op.Target, op.Range)
		}
		if op.Target == r.lease {
			return fmt.Errorf("node %d already holds the lease", op.Target)
		}
		if op.Source != 0 && op.Source != r.lease {
			return fmt.Errorf("source node %d is not the leaseholder (%d)", op.Source, r.lease)
		}
	case placement.OpSplit:
		if k := op.SplitKey; len(k) > 0 && (bytes.Compare(k, r.start) <= 0 || len(r.end) > 0 && bytes.Compare(k, r.end) >= 0) {
			return fmt.Errorf("split key %q outside (%s, %s)", k, keyString(r.start), keyString(r.end))
		}
	case placement.OpMerge:
		o := s.byID[op.Other]
		switch {
		case o == nil:
			return fmt.Errorf("no range %d to merge with", op.Other)
		case op.Other == op.Range:
			return fmt.Errorf("merge of range %d with itself", op.Range)
		case len(r.end) == 0 || !bytes.Equal(r.end, o.start):
			return fmt.Errorf("range %d is not range %d's right neighbour", op.Other, op.Range)
		case !sameReplicas(r, o):
			return fmt.Errorf("ranges %d and %d have different replicas", op.Range, op.Other)
		}
	default:
		return fmt.Errorf("unknown operator kind %s", op.Kind)
	}
	return nil
}

func sameReplicas(a, b *rangeState) bool {
	if len(a.replicas) != len(b.replicas) {
		return false
	}
	for _, ra := range a.replicas {
		rb, ok := b.has(ra.Node)
		if !ok || rb.Type != ra.Type || rb.Adaptive != ra.Adaptive {
			return false
		}
	}
	return true
}

// snapshotCounts is the number of snapshots each node sends or receives.
func (s *Sim) snapshotCounts() map[uint64]int {
	counts := map[uint64]int{}
	for _, f := range s.flights {
		if f.snapshot && f.remaining > 0 {
			counts[s.byID[f.op.Range].lease]++
			counts[f.op.Target]++
		}
	}
	return counts
}

// progress advances operators by dt. A snapshot streams from the range's
// current leaseholder at the smaller of the two ends' shares of their
// bandwidth (min(migration bandwidth, disk bandwidth) split evenly over the
// node's snapshots); then the operator's fixed time runs; then it applies.
func (s *Sim) progress(dt time.Duration) {
	for _, n := range s.nodes {
		n.io = 0
	}
	counts := s.snapshotCounts()
	rate := s.loop.Runner.MigrationRate()
	bw := func(id uint64) float64 {
		n := s.node(id)
		if n == nil || !n.up() || counts[id] == 0 {
			return 0
		}
		return min(rate, n.spec.DiskBandwidth) / float64(counts[id])
	}
	var done []*flight
	for _, f := range s.flights {
		left := dt.Seconds()
		f.rate = 0
		if f.snapshot && f.remaining > 0 {
			src := s.byID[f.op.Range].lease
			f.rate = min(bw(src), bw(f.op.Target))
			for _, id := range []uint64{src, f.op.Target} {
				if n := s.node(id); n != nil {
					n.io += f.rate / n.spec.DiskBandwidth
				}
			}
			switch need := f.remaining / f.rate; {
			case f.rate <= 0:
				left = 0 // stalled: no leaseholder
			case need <= left:
				left -= need
				f.remaining = 0
			default:
				f.remaining -= f.rate * left
				left = 0
			}
		}
		if !f.snapshot || f.remaining <= 0 {
			f.wait -= time.Duration(left * float64(time.Second))
			if f.wait <= 0 {
				done = append(done, f)
			}
		}
	}
	for _, f := range done {
		s.finish(f, nil)
	}
}

// finish ends a flight: it applies (unless err says it failed) and frees
// its ranges.
func (s *Sim) finish(f *flight, err error) {
	s.flights = slices.DeleteFunc(s.flights, func(x *flight) bool { return x == f })
	if err == nil {
		err = s.apply(f)
	}
	s.ended(f, err)
}

func (s *Sim) ended(f *flight, err error) {
	rec := OpRecord{Started: f.started.Sub(Epoch), Ended: s.clock.Elapsed(), Op: f.op}
	if err != nil {
		rec.Err = err.Error()
		s.total.Failed++
		s.logf("failed: %s: %v", control.Describe(f.op), err)
	}
	s.ops = append(s.ops, rec)
	f.done(err)
}

func (s *Sim) mergeTouches(f *flight, node uint64) bool {
	for _, id := range []uint64{f.op.Range, f.op.Other} {
		if r := s.byID[id]; r != nil {
			if _, ok := r.has(node); ok {
				return true
			}
		}
	}
	return false
}

// apply makes a finished operator's change.
func (s *Sim) apply(f *flight) error {
	op := f.op
	r := s.byID[op.Range]
	if r == nil {
		return fmt.Errorf("range %d is gone", op.Range)
	}
	now := s.clock.Now()
	targetUp := func() error {
		if !s.up(op.Target) {
			return fmt.Errorf("target node %d is down", op.Target)
		}
		return nil
	}
	switch op.Kind {
	case placement.OpAddVoter, placement.OpMoveReplica:
		if err := targetUp(); err != nil {
			return err
		}
		if op.Kind == placement.OpMoveReplica {
			if _, ok := r.has(op.Source); !ok {
				return fmt.Errorf("node %d no longer holds a replica", op.Source)
			}
		}
		if _, ok := r.has(op.Target); ok {
			for i := range r.replicas {
				if r.replicas[i].Node == op.Target {
					r.replicas[i] = placement.Replica{Node: op.Target, Type: placement.Voter}
				}
			}
		} else {
			r.replicas = append(r.replicas, placement.Replica{Node: op.Target, Type: placement.Voter})
			s.thrash.arrived(s, r.id, op.Target, now)
		}
		if op.Kind == placement.OpMoveReplica {
			s.removeReplica(r, op.Source, now)
			s.total.Moves++
		} else {
			s.total.AddVoters++
		}
	case placement.OpAddLearner:
		if err := targetUp(); err != nil {
			return err
		}
		r.replicas = append(r.replicas, placement.Replica{Node: op.Target, Type: placement.Learner, Adaptive: true})
		s.thrash.arrived(s, r.id, op.Target, now)
		s.total.AddLearners++
	case placement.OpRemoveReplica:
		s.removeReplica(r, op.Source, now)
		s.total.Removes++
	case placement.OpTransferLease:
		if err := targetUp(); err != nil {
			return err
		}
		from := r.lease
		r.lease = op.Target
		s.thrash.leaseMoved(s, r.id, from, op.Target, now)
		s.total.LeaseTransfers++
	case placement.OpSplit:
		if r.lease == 0 {
			return errors.New("no leaseholder")
		}
		if err := s.split(r, op.SplitKey, op.SplitByLoad); err != nil {
			return err
		}
		s.total.Splits++
	case placement.OpMerge:
		o := s.byID[op.Other]
		if o == nil || !bytes.Equal(r.end, o.start) || !sameReplicas(r, o) {
			return errors.New("ranges changed")
		}
		for _, rep := range r.replicas {
			if !s.up(rep.Node) {
				return fmt.Errorf("replica on node %d is down", rep.Node)
			}
		}
		s.merge(r, o)
		s.total.Merges++
	}
	if f.snapshot {
		s.total.BytesMoved += uint64(f.size)
	}
	return nil
}

func (s *Sim) removeReplica(r *rangeState, n uint64, now time.Time) {
	r.remove(n)
	if nd := s.node(n); nd != nil && nd.state == placement.NodeLive {
		// Only a replica leaving a live node was a placement choice; one
		// replaced on a dead or draining node coming back is no thrash.
		s.thrash.left(r.id, n, now)
	}
	if r.lease == n {
		s.handOff(r, n)
	}
}

// split cuts r at key, or when key is empty at the load-weighted median
// (byLoad) or the middle modeled key (the key that halves its data: the
// model spreads a range's bytes evenly over its keys). The right half gets
// a new range ID, the same replicas and leaseholder.
func (s *Sim) split(r *rangeState, key []byte, byLoad bool) error {
	idx := 0
	switch {
	case len(key) > 0:
		idx = ceilIndex(key, s.workload.Keys)
	case byLoad:
		var ok bool
		if idx, ok = s.dist.median(r.lo, r.hi); !ok {
			return fmt.Errorf("range %d holds %d modeled keys: nothing to split", r.id, r.hi-r.lo)
		}
		key = Key(idx)
	default:
		if r.hi-r.lo < 2 {
			return fmt.Errorf("range %d holds %d modeled keys: nothing to split", r.id, r.hi-r.lo)
		}
		idx = (r.lo + r.hi) / 2
		key = Key(idx)
	}
	frac := 0.5
	if r.hi > r.lo {
		frac = float64(min(max(idx, r.lo), r.hi)-r.lo) / float64(r.hi-r.lo)
	}
	now := s.clock.Now()
	right := &rangeState{
		id: s.nextRangeID(), start: slices.Clone(key), end: r.end,
		replicas: slices.Clone(r.replicas), lease: r.lease,
		bytes: r.bytes * (1 - frac), splitAt: now,
	}
	r.end = slices.Clone(key)
	r.bytes *= frac
	r.splitAt = now
	r.lo, r.hi = bounds(r.start, r.end, s.workload.Keys)
	s.addRange(right)
	s.refreshRanges()
	s.thrash.split(r.id, right.id, now)
	return nil
}

// merge folds o (r's right neighbour) into r.
func (s *Sim) merge(r, o *rangeState) {
	s.thrash.merged(s, r.id, o.id, s.clock.Now())
	r.end = o.end
	r.bytes += o.bytes
	s.dropRange(o)
	r.lo, r.hi = bounds(r.start, r.end, s.workload.Keys)
	s.refreshRanges()
}
