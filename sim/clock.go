package sim

import "time"

// Epoch is the virtual time at which every simulation starts.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is virtual time. It moves only when Advance is called.
type Clock struct{ now time.Time }

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Now is the current virtual time.
func (c *Clock) Now() time.Time { return c.now }

// Elapsed is the virtual time since Epoch.
func (c *Clock) Elapsed() time.Duration { return c.now.Sub(Epoch) }

// Advance moves the clock forward by d (negative durations are ignored).
func (c *Clock) Advance(d time.Duration) {
	if d > 0 {
		c.now = c.now.Add(d)
	}
}
