package raftstore

import (
	"fmt"
	"sync"
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

// stepSlack is how far the wall clock may move against the monotonic clock
// between two readings without counting as a step: reading the two is not
// atomic (a few microseconds), and 1000 ppm of the time between readings
// is more than any frequency error NTP corrects by slewing (500 ppm).
func stepSlack(elapsed time.Duration) time.Duration {
	return time.Millisecond + elapsed/1000
}

// SteadyClock is the node's time: Config.Clock (the wall clock), except
// that a step of it — a jump the monotonic clock did not make: an NTP
// step, an operator, a resumed VM, SkewClock.Set — is not followed until
// the offset monitor, measuring the stepped wall clock against the peers',
// finds that they agree with it (Follow). Until then the time runs on from
// the last agreed reading at the monotonic clock's pace. Timestamps taken
// from a wall clock that has just jumped beyond the maximum offset would
// otherwise be handed out in the moments before the monitor notices:
// writes far in the future that readers with correct clocks do not see,
// though they began after the write was acknowledged. It is safe for
// concurrent use.
type SteadyClock struct {
	wall Clock // nil: the system clock, whose every reading carries both
	// guarded is false over a clock that is not the system clock moved
	// (a test's manual clock): it is its own monotonic clock, taken as is.
	guarded bool
	base    time.Time

	mu sync.Mutex
	// The anchor is the last reading followed: wall time and monotonic
	// time since base.
	anchorWall time.Time
	anchorMono time.Duration
	// drift is the wall clock minus the anchor's projection at the last
	// reading: 0 while the wall clock is followed, the step while one is
	// not.
	drift time.Duration
	// steps counts the steps seen, followed or not.
	steps uint64
}

// NewSteadyClock returns the steady time over wall (nil: the system
// clock), guarded against steps when wall is the system clock or a
// SkewClock, the clocks that run at the monotonic clock's pace; any other
// (a test's manual clock) is taken as is. Over a SteadyClock it is that clock: a store given one as
// Config.Clock shares it with whoever made it (the server's offset
// monitor).
func NewSteadyClock(wall Clock) *SteadyClock {
	guarded := true
	switch w := wall.(type) {
	case *SteadyClock:
		return w
	case systemClock:
		wall = nil
	case nil, *SkewClock:
	default:
		guarded = false
	}
	c := &SteadyClock{wall: wall, guarded: guarded, base: time.Now()}
	c.anchorWall, c.anchorMono = c.wallNow(c.base), 0
	return c
}

// wallNow is the wall clock at t, the reading read takes the monotonic
// time from. A SkewClock is the system clock plus its offset, so it is
// read from t too: its own Now would be a second reading of the system
// clock, and a scheduling delay between the two (over a millisecond on a
// loaded machine) would count as a step that never happened.
func (c *SteadyClock) wallNow(t time.Time) time.Time {
	switch w := c.wall.(type) {
	case nil:
		return t
	case *SkewClock:
		return t.Add(w.Offset())
	}
	return c.wall.Now()
}

// read takes one reading of both clocks; with c.mu held.
func (c *SteadyClock) read() (wall, steady time.Time) {
	t := time.Now()
	wall, mono := c.wallNow(t), t.Sub(c.base)
	if !c.guarded {
		return wall, wall
	}
	steady = c.anchorWall.Add(mono - c.anchorMono)
	d := wall.Sub(steady)
	slack := stepSlack(mono - c.anchorMono)
	if (d - c.drift).Abs() > slack {
		c.steps++
	}
	c.drift = d
	if d.Abs() <= slack {
		// Followed, or a step undone: the wall clock is the time again.
		c.anchorWall, c.anchorMono, c.drift = wall, mono, 0
		return wall, wall
	}
	return wall, steady
}

// Now is the node's time: the wall clock unless it stepped and the step
// is not followed yet.
func (c *SteadyClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, steady := c.read()
	return steady
}

// WallNow reads the wall clock itself, stepped or not: what the offset
// monitor measures against the peers'.
func (c *SteadyClock) WallNow() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	wall, _ := c.read()
	return wall
}

// Steps counts the steps of the wall clock seen so far; an offset
// estimate measured across a step is meaningless.
func (c *SteadyClock) Steps() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	return c.steps
}

// Pending is the step not followed yet (the wall clock minus the node's
// time), 0 when there is none.
func (c *SteadyClock) Pending() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	return c.drift
}

// Follow makes the node's time the wall clock again, step and all; the
// offset monitor calls it once the peers' clocks agree with the stepped
// one.
func (c *SteadyClock) Follow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := time.Now()
	c.anchorWall, c.anchorMono, c.drift = c.wallNow(t), t.Sub(c.base), 0
}

// Now is the node's time (SteadyClock over Config.Clock): what closed
// timestamps and the HLC read.
func (s *Store) Now() time.Time { return s.clock.Now() }

// HLC is the node's hybrid logical clock, over the node's time (Now) and
// bounded by Config.MaxClockOffset.
func (s *Store) HLC() *hlc.Clock { return s.hlc }

// admitTimestamp folds ts, the timestamp a request reads or writes at
// (what names it), into the node's clock, and refuses the request with
// ErrInvalidRequest (INVALID_ARGUMENT, which no client retries) when ts is
// more than the maximum offset ahead of this node's clock: no clock within
// the offset assumption could have produced it. Refused as unavailable, it
// was retried until real time caught up with it and then written, at a
// timestamp the cluster never handed out.
func (s *Store) admitTimestamp(ts hlc.Timestamp, what string) error {
	if _, err := s.hlc.Update(ts); err != nil {
		return fmt.Errorf("%w: %s timestamp %s is in the future, more than the maximum clock offset %v ahead of node %d's clock",
			ErrInvalidRequest, what, ts, s.hlc.MaxOffset(), s.nodeID)
	}
	return nil
}

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
