package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Target is a cluster faults can be done to; node indexes are 1-based.
type Target interface {
	Kill(i int) error
	Restart(ctx context.Context, i int) error
	Pause(i int) error
	Resume(i int) error
}

// Partitioner is a Target that can also cut a node off the network: Isolate
// cuts node i's Raft traffic with every other node, Heal restores it.
type Partitioner interface {
	Isolate(i int) error
	Heal(i int) error
}

// LinkCutter is a Target that can also cut the links between two sets of
// nodes: CutLinks cuts the Raft traffic between every node of a and every
// node of b (nil: every node not in a), both ways, and nothing else;
// HealLinks restores it. A bridge cuts one pair, a split the cluster in
// two.
type LinkCutter interface {
	CutLinks(a, b []int) error
	HealLinks(a, b []int) error
}

// Operator is a Target that can also change the cluster's membership, for
// Move and Churn: MoveReplica moves node from's voter of a range to
// another node (pick chooses the range and the node); Decommission
// starts (drain) or cancels
// node i's decommission. A refusal or timeout that a fault explains is
// the target's to record, not an error: an error ends the run.
type Operator interface {
	MoveReplica(ctx context.Context, from int, pick uint64) error
	Decommission(ctx context.Context, i int, drain bool) error
}

// Rearranger is a Target that can also change the range layout of the
// workload's keys, for RangeSplit, Merge and LeaseTransfer: SplitRange
// splits a range at a key pick chooses, MergeRange joins a range pick
// chooses with its right neighbour, TransferLease moves the lease of a
// range pick chooses to node to. As for an Operator, a refusal a fault
// explains is the target's to record, not an error.
type Rearranger interface {
	SplitRange(ctx context.Context, pick uint64) error
	MergeRange(ctx context.Context, pick uint64) error
	TransferLease(ctx context.Context, to int, pick uint64) error
}

// Skewer is a Target that can also offset a node's clock: Skew sets node
// i's offset (0 removes it).
type Skewer interface {
	Skew(i int, d time.Duration) error
}

// DiskSlower is a Target that can also slow a node's disk: SlowDisk makes
// each of node i's syncs wait d (0 restores it).
type DiskSlower interface {
	SlowDisk(i int, d time.Duration) error
}

// DiskFailer is a Target that can also fail a node's disk: FailDisk makes
// every write of node i's engine fail, which stops the node at its next
// write; RecoverDisk brings node i back on its disk, healthy again (a node
// that wrote nothing meanwhile, and so still runs, is stopped first).
type DiskFailer interface {
	FailDisk(i int) error
	RecoverDisk(ctx context.Context, i int) error
}

// Wiper is a Target that can also wipe a stopped node's data, so that it
// restarts as a fresh node (Replace), and wait until the cluster has
// re-created elsewhere what the wiped node held: until then a second fault
// may take a range's quorum for good, which is two faults at once.
type Wiper interface {
	Wipe(i int) error
	AwaitRepair(ctx context.Context, i int) error
}

// can reports whether t can do faults of kind k.
func can(t Target, k Kind) bool {
	var ok bool
	switch k {
	case Partition:
		_, ok = t.(Partitioner)
	case Skew:
		_, ok = t.(Skewer)
	case SlowDisk:
		_, ok = t.(DiskSlower)
	case DiskFail:
		_, ok = t.(DiskFailer)
	case Replace:
		_, ok = t.(Wiper)
	case Bridge, Split:
		_, ok = t.(LinkCutter)
	case Move, Churn:
		_, ok = t.(Operator)
	case RangeSplit, Merge, LeaseTransfer:
		_, ok = t.(Rearranger)
	default:
		ok = true
	}
	return ok
}

// Run carries out steps against t, each at its time after now, and calls
// log before each. It returns when the last step has ended (its node
// restarted, resumed, healed, its clock or disk restored, recommissioned),
// or with the first error; a node left down by a cancelled ctx is brought
// back before returning. It also returns when the last step was lifted:
// the moment Run began to undo the last fault (a restart starts the
// process, so what the target then waits for, a node's readiness or a
// replaced node's repair, is the cluster recovering, not the fault), or
// an operation returned, whichever came later; a convergence figure
// counts from it. Faults run one after another, and so do
// operations, but the two beside each other, so that an operation meets
// the fault it was planned in (log may then be called from both at once).
// A plan with partitions, skews, slow or failing disks, replacements,
// bridges, splits or operations needs a t that is also a Partitioner,
// Skewer, DiskSlower, DiskFailer, Wiper, LinkCutter, Operator or
// Rearranger; that is checked first.
func Run(ctx context.Context, steps []Step, t Target, log func(Step)) (lifted time.Time, err error) {
	for _, s := range steps {
		if !can(t, s.Kind) {
			return time.Time{}, fmt.Errorf("nemesis: %s: this target cannot do %s faults", s, s.Kind)
		}
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var opErr error
	var opLifted time.Time
	var wg sync.WaitGroup
	wg.Go(func() {
		if opLifted, opErr = runTrack(ctx, start, steps, true, t, log); opErr != nil {
			cancel()
		}
	})
	lifted, err = runTrack(ctx, start, steps, false, t, log)
	if err != nil {
		cancel()
	}
	wg.Wait()
	if opLifted.After(lifted) {
		lifted = opLifted
	}
	if err == nil || errors.Is(err, context.Canceled) && opErr != nil {
		return lifted, opErr // the operations' error cancelled the faults
	}
	return lifted, err
}

// runTrack carries out the steps that are operations (ops) or faults
// (!ops), in order, and returns when the last of them was lifted.
func runTrack(ctx context.Context, start time.Time, steps []Step, ops bool, t Target, log func(Step)) (lifted time.Time, err error) {
	for _, s := range steps {
		if s.Kind.Operation() != ops {
			continue
		}
		if err := sleep(ctx, time.Until(start.Add(s.At))); err != nil {
			return lifted, err
		}
		if log != nil {
			log(s)
		}
		if lifted, err = do(ctx, t, s); err != nil {
			return lifted, fmt.Errorf("nemesis: %s: %w", s, err)
		}
	}
	return lifted, nil
}

// do carries out s and returns when it was lifted: when undoing it began,
// or, for a move, when the move returned.
func do(ctx context.Context, t Target, s Step) (lifted time.Time, err error) {
	down, up := t.Kill, func(i int) error { return t.Restart(context.WithoutCancel(ctx), i) }
	switch s.Kind {
	case Pause:
		down, up = t.Pause, t.Resume
	case Partition:
		p := t.(Partitioner)
		down, up = p.Isolate, p.Heal
	case Skew:
		sk := t.(Skewer)
		down = func(i int) error { return sk.Skew(i, s.Amount) }
		up = func(i int) error { return sk.Skew(i, 0) }
	case SlowDisk:
		sd := t.(DiskSlower)
		down = func(i int) error { return sd.SlowDisk(i, s.Amount) }
		up = func(i int) error { return sd.SlowDisk(i, 0) }
	case Replace:
		w := t.(Wiper)
		down = func(i int) error {
			if err := t.Kill(i); err != nil {
				return err
			}
			return w.Wipe(i)
		}
		up = func(i int) error {
			if err := t.Restart(context.WithoutCancel(ctx), i); err != nil {
				return err
			}
			return w.AwaitRepair(context.WithoutCancel(ctx), i)
		}
	case DiskFail:
		df := t.(DiskFailer)
		down = df.FailDisk
		up = func(i int) error { return df.RecoverDisk(context.WithoutCancel(ctx), i) }
	case Bridge, Split:
		lc := t.(LinkCutter)
		a, b := s.sides()
		down = func(int) error { return lc.CutLinks(a, b) }
		up = func(int) error { return lc.HealLinks(a, b) }
	case Move, RangeSplit, Merge, LeaseTransfer:
		mctx, cancel := context.WithTimeout(ctx, s.For)
		defer cancel()
		var err error
		switch s.Kind {
		case Move:
			err = t.(Operator).MoveReplica(mctx, s.Node, s.Pick)
		case RangeSplit:
			err = t.(Rearranger).SplitRange(mctx, s.Pick)
		case Merge:
			err = t.(Rearranger).MergeRange(mctx, s.Pick)
		default:
			err = t.(Rearranger).TransferLease(mctx, s.Node, s.Pick)
		}
		return time.Now(), err
	case Churn:
		op := t.(Operator)
		down = func(i int) error {
			dctx, cancel := context.WithTimeout(ctx, s.For)
			defer cancel()
			return op.Decommission(dctx, i, true)
		}
		// Recommissioning is the recovery: it must not be cut short.
		up = func(i int) error { return op.Decommission(context.WithoutCancel(ctx), i, false) }
	}
	if err := down(s.Node); err != nil {
		return time.Time{}, err
	}
	werr := sleep(ctx, s.For)
	lifted = time.Now()
	if err := up(s.Node); err != nil {
		return lifted, err
	}
	return lifted, werr
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
