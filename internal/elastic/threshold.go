package elastic

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/internal/units"
)

// OverflowConfig tunes the growth of cache key spaces whose setting says
// to grow rather than evict when full (keyspace.OnFull). Shares are of a
// node's capacity for the key space; rates are bytes per second.
type OverflowConfig struct {
	// MinThreshold and MaxThreshold clamp the pre-launch threshold T: a
	// node holding T or more of a key space asks for one more node.
	// Setting both to the same share fixes T there (no speculation).
	MinThreshold, MaxThreshold float64
	// ShedAt is the share at which a node sheds data of the key space:
	// its fullest range (split at the median first when it is above
	// MaxMoveShare) moves to the node with most room. Below eviction's
	// low-water mark (cache.Config.LowWater, 0.95), so that a node that
	// evicted still sheds: at the same share it stayed just under it and
	// a growing key space stalled (bench cache paper-fig3 at 3 nodes).
	ShedAt float64
	// MaxMoveShare is the largest range, as a share of the capacity, that
	// moves whole; a bigger one is split at its median first.
	MaxMoveShare float64
	// RateAlpha smooths the key space's fill rate across rounds (1: the
	// last round's rate alone).
	RateAlpha float64
	// RateWindow is how long the lowest and highest per-node fill rates
	// (the rule's δL and δH) are remembered.
	RateWindow time.Duration
	// MinRate is the floor of δL, so that a key space nobody writes does
	// not divide by zero.
	MinRate float64
}

// DefaultOverflowConfig clamps T to [0.1, 0.95] of the capacity as the
// issue asks, sheds at 95%, moves at most an eighth of a node's capacity
// in one range, and remembers fill rates for ten minutes.
func DefaultOverflowConfig() OverflowConfig {
	return OverflowConfig{MinThreshold: 0.1, MaxThreshold: 0.95, ShedAt: 0.9, MaxMoveShare: 0.125,
		RateAlpha: 0.3, RateWindow: 10 * time.Minute, MinRate: 1024}
}

// Validate reports a setting that cannot work.
func (c OverflowConfig) Validate() error {
	switch {
	case !(c.MinThreshold > 0 && c.MinThreshold <= c.MaxThreshold && c.MaxThreshold <= 1):
		return fmt.Errorf("overflow thresholds need 0 < min ≤ max ≤ 1 (min %v, max %v)", c.MinThreshold, c.MaxThreshold)
	case !(c.ShedAt > 0 && c.ShedAt <= 1):
		return fmt.Errorf("overflow shed share %v must be in (0, 1]", c.ShedAt)
	case !(c.MaxMoveShare > 0 && c.MaxMoveShare < 1):
		return fmt.Errorf("overflow largest moved range %v must be a share in (0, 1)", c.MaxMoveShare)
	case !(c.RateAlpha > 0 && c.RateAlpha <= 1):
		return fmt.Errorf("overflow rate smoothing %v must be in (0, 1]", c.RateAlpha)
	case c.RateWindow <= 0 || !(c.MinRate > 0):
		return errors.New("overflow rate window and minimum rate must be positive")
	}
	return nil
}

// Terms are the pre-launch rule's terms as measured for one node of one
// key space: T = c(n)/2 + δH·(‖N‖ − R/δL).
type Terms struct {
	// Capacity is c(n): the bytes of the key space the node may hold.
	Capacity float64
	// Nodes is ‖N‖: the live nodes holding or able to hold the key space.
	Nodes int
	// Rate is R: the bytes per second the node's share of the key space
	// grows by now. Low and High are δL and δH: the lowest and highest
	// per-node fill rates seen within the rate window.
	Rate, Low, High float64
	// Lead turns δH into bytes: the rule counts in records per time
	// step, and the step that matters is how long a new node takes to
	// serve, so δH·Lead is what a node gains at the highest rate while
	// one starts.
	Lead time.Duration
}

// Threshold is T in bytes, clamped to [MinThreshold, MaxThreshold] of the
// capacity, and the unclamped value (which may be negative).
func Threshold(t Terms, cfg OverflowConfig) (clamped, raw float64) {
	raw = t.Capacity/2 + t.High*t.Lead.Seconds()*(float64(t.Nodes)-t.Rate/max(t.Low, cfg.MinRate))
	return min(max(raw, cfg.MinThreshold*t.Capacity), cfg.MaxThreshold*t.Capacity), raw
}

// Explain says how T came out, with each term, for events.
func (t Terms) Explain(clamped, raw float64) string {
	s := fmt.Sprintf("T = c/2 %s + δH %s/s × %v × (‖N‖ %d − R %s/s ÷ δL %s/s) = %s",
		units.Human(uint64(t.Capacity/2)), units.Human(uint64(t.High)), t.Lead, t.Nodes,
		units.Human(uint64(t.Rate)), units.Human(uint64(t.Low)), signedHuman(raw))
	if clamped != raw {
		s += fmt.Sprintf(", clamped to %s (%.0f%% of capacity)", units.Human(uint64(clamped)), 100*clamped/t.Capacity)
	}
	return s
}

func signedHuman(v float64) string {
	if v < 0 {
		return "−" + units.Human(uint64(-v))
	}
	return units.Human(uint64(v))
}
