package raftstore

import (
	"testing"
	"time"
)

// A step of the wall clock is not followed until Follow; undone, it is
// followed again at once; every step is counted.
func TestSteadyClockHoldsStepsUntilFollowed(t *testing.T) {
	wall := &SkewClock{}
	c := NewSteadyClock(wall)
	near := func(what string, read func() time.Time, want time.Duration) {
		t.Helper()
		// want is the expected offset from the system clock. The reading
		// must lie between two system-clock readings taken around it:
		// a bound measured after the reading would grow with any
		// scheduling delay between the two (50 ms used to be allowed).
		before := time.Now()
		got := read()
		after := time.Now()
		if got.Before(before.Add(want)) || got.After(after.Add(want)) {
			t.Fatalf("%s: %v to %v from the system clock, want %v", what, got.Sub(after), got.Sub(before), want)
		}
	}
	near("before a step", c.Now, 0)
	if c.Steps() != 0 || c.Pending() != 0 {
		t.Fatalf("before a step: %d steps, %v pending", c.Steps(), c.Pending())
	}

	wall.Set(570 * time.Millisecond)
	near("after a step", c.Now, 0)
	near("the wall clock after a step", c.WallNow, 570*time.Millisecond)
	if p := c.Pending(); c.Steps() != 1 || p != 570*time.Millisecond {
		t.Fatalf("after a step: %d steps, %v pending; want 1 and 570ms", c.Steps(), p)
	}

	wall.Set(0)
	near("the step undone", c.Now, 0)
	if c.Steps() != 2 || c.Pending() != 0 {
		t.Fatalf("the step undone: %d steps, %v pending; want 2 and none", c.Steps(), c.Pending())
	}

	wall.Set(-time.Second)
	near("a step back", c.Now, 0)
	c.Follow()
	near("the step back followed", c.Now, -time.Second)
	if c.Steps() != 3 || c.Pending() != 0 {
		t.Fatalf("the step followed: %d steps, %v pending; want 3 and none", c.Steps(), c.Pending())
	}
	if NewSteadyClock(c) != c {
		t.Fatal("a steady clock over a steady clock must be that clock")
	}
}
