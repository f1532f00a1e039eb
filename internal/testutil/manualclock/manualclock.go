// Package manualclock is the clock tests move by hand, shared so that
// each package does not grow its own copy.
package manualclock

import (
	"sync"
	"time"
)

// Clock reads the time a test set, safely from any goroutine; it moves
// only when the test moves it, backwards too.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock reading t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the time the test set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Advance moves the clock by d (back, for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
