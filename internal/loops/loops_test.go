package loops

import (
	"context"
	"testing"
	"time"
)

// A loop runs until the group closes, and a run under way sees its
// context end at the close, not at its timeout; Wait returns once the
// loop has.
func TestCloseEndsLoopsAndRuns(t *testing.T) {
	g := New()
	started := make(chan struct{})
	ended := make(chan error, 1)
	runs := 0
	g.EveryWithin(time.Millisecond, time.Hour, func(ctx context.Context) {
		runs++
		if runs == 3 {
			close(started)
			<-ctx.Done()
			ended <- ctx.Err()
		}
	})
	<-started
	g.Close()
	if err := <-ended; err != context.Canceled {
		t.Fatalf("the run's context ended with %v, want canceled by the close", err)
	}
	g.Wait()
	select {
	case <-g.Stopped():
	default:
		t.Fatal("Stopped not closed after Close")
	}
}

// A task started with Go is waited for.
func TestWaitWaitsForTasks(t *testing.T) {
	g := New()
	done := false
	g.Go(func() { <-g.Stopped(); time.Sleep(10 * time.Millisecond); done = true })
	g.Close()
	g.Wait()
	if !done {
		t.Fatal("Wait returned before the task")
	}
}

// A wakeable loop runs onWake when woken, and the next wake's run starts
// no sooner than the gap after the previous run returned. (The gap used
// to count from the loop's clock reading before a run, which the run's own
// reading follows by a scheduling delay: the test saw 49.66 ms under CI
// load.)
func TestWakeableKeepsTheGap(t *testing.T) {
	g := New()
	defer g.Wait()
	defer g.Close()
	const gap = 50 * time.Millisecond
	wake := make(chan struct{})
	woken := make(chan time.Time)
	g.Wakeable(time.Hour, gap, wake, func(context.Context) { t.Error("ticked") }, func(context.Context) { woken <- time.Now() })
	wake <- struct{}{}
	first := <-woken
	wake <- struct{}{}
	if d := (<-woken).Sub(first); d < gap {
		t.Fatalf("second wake ran %v after the first, want at least %v", d, gap)
	}
}

func TestRunTimeout(t *testing.T) {
	if got := RunTimeout(time.Second); got != 6*time.Second {
		t.Fatalf("RunTimeout(1s) = %v, want 6s", got)
	}
}
