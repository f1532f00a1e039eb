package hlc

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// PhysicalClock is the wall clock a Clock reads. raftstore.Clock (the
// system clock, or a SkewClock under fault injection) satisfies it.
type PhysicalClock interface {
	Now() time.Time
}

// DefaultMaxOffset is the maximum clock offset a cluster assumes unless
// told otherwise (raftstore.Config.MaxClockOffset; the Go client's clock).
// It must stay below half the election timeout (docs/transactions.md,
// "Max offset and leases").
const DefaultMaxOffset = 250 * time.Millisecond

// ErrClockOffset: a remote timestamp lies further ahead of the local
// physical clock than the maximum offset allows.
var ErrClockOffset = errors.New("hlc: remote clock too far ahead")

// Clock hands out increasing timestamps. It is safe for concurrent use.
type Clock struct {
	phys      PhysicalClock
	maxOffset time.Duration

	mu   sync.Mutex
	last Timestamp // the newest timestamp handed out or received
}

// NewClock returns a clock over phys that accepts remote timestamps at most
// maxOffset ahead of phys. The bound is what the cluster assumes of its
// clocks (every node must use the same); it must be positive.
func NewClock(phys PhysicalClock, maxOffset time.Duration) (*Clock, error) {
	if phys == nil {
		return nil, errors.New("hlc: a clock needs a physical clock")
	}
	if maxOffset <= 0 {
		return nil, fmt.Errorf("hlc: the maximum clock offset must be positive, got %v", maxOffset)
	}
	return &Clock{phys: phys, maxOffset: maxOffset}, nil
}

// MaxOffset is the bound the clock was created with.
func (c *Clock) MaxOffset() time.Duration { return c.maxOffset }

// Now returns a timestamp after every one the clock handed out or received
// before: the physical time when that is ahead, else the newest one's
// successor.
func (c *Clock) Now() Timestamp {
	pt := c.phys.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = advance(c.last, pt)
	return c.last
}

// Update folds in a timestamp received from another node and returns one
// after both it and every timestamp this clock handed out before; every
// later Now is after it too. A remote timestamp more than the maximum
// offset ahead of the local physical clock is refused with ErrClockOffset
// and leaves the clock as it was: either that node's clock is wrong or
// this one's is, and adopting it would carry the error to every node.
func (c *Clock) Update(remote Timestamp) (Timestamp, error) {
	pt := c.phys.Now().UnixNano()
	// In uint64: the difference of two int64s may not fit one.
	if ahead := uint64(remote.WallTime) - uint64(pt); remote.WallTime > pt && ahead > uint64(c.maxOffset) {
		return Timestamp{}, fmt.Errorf("%w: remote timestamp %s is %v ahead of this node's clock (%s), beyond the maximum offset %v",
			ErrClockOffset, remote, time.Duration(min(ahead, math.MaxInt64)), Timestamp{WallTime: pt}, c.maxOffset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	newest := c.last
	if newest.Less(remote) {
		newest = remote
	}
	c.last = advance(newest, pt)
	return c.last, nil
}

// advance returns the physical time pt if it is after newest's wall time,
// else newest's successor.
func advance(newest Timestamp, pt int64) Timestamp {
	if pt > newest.WallTime {
		return Timestamp{WallTime: pt}
	}
	return newest.Next()
}
