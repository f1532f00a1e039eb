package raftstore

import (
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
)

// Clock is the wall clock closed timestamps read (closed.go): they compare a
// leaseholder's time with a follower's, so an offset between nodes shifts a
// BOUNDED read's staleness by as much. Leases never read it: they are
// measured on the process's monotonic clock (monoNow), which steps of the
// wall clock (NTP, VM resume, operator, SkewClock.Set) do not move.
type Clock interface {
	Now() time.Time
}

// SkewClock is the system clock plus an offset that can be changed while
// the node runs, for clock-skew fault injection. Changing the offset is a
// step of the node's wall clock. The zero value has no offset.
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

// Now is the store's wall-clock time for closed timestamps (Config.Clock).
func (s *Store) Now() time.Time { return s.clock.Now() }

// HLC is the node's hybrid logical clock, over Config.Clock and bounded by
// Config.MaxClockOffset.
func (s *Store) HLC() *hlc.Clock { return s.hlc }

// SetClockTrusted records the offset monitor's judgement of this node's
// clock. While it is untrusted (reason says why) no replica of the store
// holds a lease: none serves lease reads or publishes closed timestamps,
// and none serves BOUNDED reads from closed timestamps, which its clock
// measures. Leaders stay leaders (writes and ReadIndex reads need no
// clock); the server hands their leadership to trusted nodes.
func (s *Store) SetClockTrusted(trusted bool, reason string) {
	if trusted {
		s.clockUntrusted.Store(nil)
		return
	}
	s.clockUntrusted.Store(&reason)
}

// ClockUntrusted returns why the node's clock is not trusted, or "" when
// it is.
func (s *Store) ClockUntrusted() string {
	if r := s.clockUntrusted.Load(); r != nil {
		return *r
	}
	return ""
}

// monoTime is a reading of the process's monotonic clock in nanoseconds
// since monoBase; 0 means never. It means nothing to another process or
// after a restart, so it is neither sent nor persisted.
type monoTime int64

var monoBase = time.Now()

// monoNow reads the monotonic clock. Where the system has a boot-time
// clock (Linux, clock_linux.go) it is that one: never stepped either, and
// unlike Go's monotonic clock it keeps counting while the machine is
// suspended, so a leaseholder resumed from suspend finds its lease over
// instead of serving for what was left of it.
var monoNow = goMonoNow

// goMonoNow uses time.Now's monotonic reading, which is never stepped.
func goMonoNow() monoTime { return monoTime(time.Since(monoBase)) }
