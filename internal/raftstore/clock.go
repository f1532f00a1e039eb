package raftstore

import (
	"sync/atomic"
	"time"
)

// Clock is what leases and closed timestamps read the time from. Leases
// compare times of one node's own clock only (lease.go), so an offset
// between nodes cannot stretch them; a step of a node's clock can, by the
// step. Closed timestamps compare a leaseholder's time with a follower's
// (closed.go), so an offset shifts a BOUNDED read's staleness by as much.
type Clock interface {
	Now() time.Time
}

// SkewClock is the system clock plus an offset that can be changed while
// the node runs, for clock-skew fault injection. Changing the offset is a
// step of the node's clock. The zero value has no offset.
type SkewClock struct {
	offset atomic.Int64
}

// Now returns the system time plus the offset.
func (c *SkewClock) Now() time.Time { return time.Now().Add(c.Offset()) }

// Set sets the offset (0 removes it).
func (c *SkewClock) Set(d time.Duration) { c.offset.Store(int64(d)) }

// Offset returns the offset.
func (c *SkewClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Now is the store's time for leases and closed timestamps (Config.Clock).
func (s *Store) Now() time.Time { return s.clock.Now() }
