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

// Run carries out steps against t, each at its time after now, and calls
// log before each. It returns when the last step has ended (its node
// restarted or resumed), or with the first error; a node left down by a
// cancelled ctx is brought back before returning.
func Run(ctx context.Context, steps []Step, t Target, log func(Step)) error {
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
	if s.Kind == Pause {
		down, up = t.Pause, t.Resume
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
