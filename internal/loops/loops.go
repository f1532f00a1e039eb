package loops

import (
	"context"
	"sync"
	"time"
)

// Group is a node's loops and tasks.
type Group struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// New is a group with nothing running.
func New() *Group { return &Group{stop: make(chan struct{})} }

// Stopped is closed once the group stops.
func (g *Group) Stopped() <-chan struct{} { return g.stop }

// Close tells the loops and tasks to stop; call it once.
func (g *Group) Close() { close(g.stop) }

// Wait waits until every loop and task has returned.
func (g *Group) Wait() { g.wg.Wait() }

// Go runs f as a task of the group: Wait waits for it.
func (g *Group) Go(f func()) { g.wg.Go(f) }

// RunTimeout is four of a run's intervals plus slack for slow RPCs.
func RunTimeout(every time.Duration) time.Duration { return 4*every + 2*time.Second }

// Every runs fn every interval until the group stops, each run bounded by
// RunTimeout(every).
func (g *Group) Every(every time.Duration, fn func(ctx context.Context)) {
	g.EveryWithin(every, RunTimeout(every), fn)
}

// EveryWithin runs fn every interval until the group stops, each run with
// a context that ends when the group stops or after timeout.
func (g *Group) EveryWithin(every, timeout time.Duration, fn func(ctx context.Context)) {
	g.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				g.run(timeout, fn)
			}
		}
	})
}

// Wakeable runs onTick every interval and onWake when woken, no sooner
// than gap after the previous onWake returned, each run bounded by
// RunTimeout(every). The gap counts from the end of a run, not its
// start, so a run that takes longer than the gap still leaves the gap
// free before the next.
func (g *Group) Wakeable(every, gap time.Duration, wake <-chan struct{}, onTick, onWake func(context.Context)) {
	g.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		var wokenAt time.Time
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				g.run(RunTimeout(every), onTick)
			case <-wake:
				if wait := time.Until(wokenAt.Add(gap)); wait > 0 {
					select {
					case <-g.stop:
						return
					case <-time.After(wait):
					}
				}
				g.run(RunTimeout(every), onWake)
				wokenAt = time.Now()
			}
		}
	})
}

// run runs fn once, with a context that ends when the group stops or
// after timeout.
func (g *Group) run(timeout time.Duration, fn func(ctx context.Context)) {
	ctx, cancel := g.UntilStop(timeout)
	defer cancel()
	fn(ctx)
}

// UntilStop returns a context that ends after timeout or when the group
// stops, whichever comes first.
func (g *Group) UntilStop(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	go func() {
		select {
		case <-g.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
