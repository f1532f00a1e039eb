package nemesis

import (
	"context"
	"fmt"
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

// LinkCutter is a Target that can also cut the link between two nodes:
// CutLink cuts node i's and node j's Raft traffic with each other (both
// ways), HealLink restores it.
type LinkCutter interface {
	CutLink(i, j int) error
	HealLink(i, j int) error
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
	case Bridge:
		_, ok = t.(LinkCutter)
	default:
		ok = true
	}
	return ok
}

// Run carries out steps against t, each at its time after now, and calls
// log before each. It returns when the last step has ended (its node
// restarted, resumed, healed, its clock or disk restored), or with the
// first error; a node left down by a cancelled ctx is brought back before
// returning. A plan with partitions, skews, slow disks or bridges needs a t
// that is also a Partitioner, Skewer, DiskSlower or LinkCutter; that is
// checked first.
func Run(ctx context.Context, steps []Step, t Target, log func(Step)) error {
	for _, s := range steps {
		if !can(t, s.Kind) {
			return fmt.Errorf("nemesis: %s: this target cannot do %s faults", s, s.Kind)
		}
	}
	start := time.Now()
	for _, s := range steps {
		if err := sleep(ctx, time.Until(start.Add(s.At))); err != nil {
			return err
		}
		if log != nil {
			log(s)
		}
		if err := do(ctx, t, s); err != nil {
			return fmt.Errorf("nemesis: %s: %w", s, err)
		}
	}
	return nil
}

func do(ctx context.Context, t Target, s Step) error {
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
	case Bridge:
		lc := t.(LinkCutter)
		down = func(i int) error { return lc.CutLink(i, s.Peer) }
		up = func(i int) error { return lc.HealLink(i, s.Peer) }
	}
	if err := down(s.Node); err != nil {
		return err
	}
	werr := sleep(ctx, s.For)
	if err := up(s.Node); err != nil {
		return err
	}
	return werr
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
