package elastic

import (
	"fmt"
	"time"
)

// Bandwidth sets the migration rate each round: additive increase while
// foreground p99 is well under the SLO and within MaxSlowdown of its
// steady value (p99 while no data moves), multiplicative decrease when
// it nears the SLO, exceeds the slowdown (or the admission queue fills),
// never below the floor so data moves always progress. In between it
// holds.
type Bandwidth struct {
	cfg    BandwidthConfig
	start  float64 // the rate each burst of moves starts from
	rate   float64
	steady time.Duration // smoothed p99 while no data moves (0: not yet seen)
	p99    time.Duration // smoothed p99
}

// Smoothing of the p99s the controller compares: one noisy second must
// not cut or raise the rate.
const (
	steadyAlpha = 0.1
	p99Alpha    = 0.4
)

// NewBandwidth starts at initial (bytes/s), clamped into cfg's limits.
// A burst of moves after a quiet spell starts again from the last rate
// that kept p99 within half the allowed slowdown: a burst that starts
// at the ceiling slows the foreground before the first feedback.
func NewBandwidth(cfg BandwidthConfig, initial float64) *Bandwidth {
	start := min(max(initial, cfg.Min), cfg.Max)
	return &Bandwidth{cfg: cfg, start: start, rate: start}
}

// SetConfig changes the limits; the rate is clamped into them.
func (b *Bandwidth) SetConfig(cfg BandwidthConfig) {
	b.cfg = cfg
	b.start = min(max(b.start, cfg.Min), cfg.Max)
	b.rate = min(max(b.rate, cfg.Min), cfg.Max)
}

// Rate is the allowance now (bytes/s per node).
func (b *Bandwidth) Rate() float64 { return b.rate }

// Signals are what the bandwidth controller reads each round.
type Signals struct {
	// P99 is the worst foreground p99, Queue the fullest admission queue.
	P99   time.Duration
	Queue float64
	// Moving: data is being moved now. Only then does the rate's effect
	// show in p99, so only then may it grow.
	Moving bool
	// Urgent: the moves bring capacity the serving nodes need now; only
	// the SLO bounds them, not MaxSlowdown.
	Urgent bool
	// Overloaded: requests are refused for lack of capacity while new
	// nodes take data. Throttling migration cannot save the SLO then; it
	// would only keep the overload longer.
	Overloaded bool
}

// Decide adjusts the rate from this round's signals against slo and
// says why.
func (b *Bandwidth) Decide(s Signals, slo time.Duration) (rate float64, reason string) {
	c := b.cfg
	b.p99 = smooth(b.p99, s.P99, p99Alpha)
	if !s.Moving {
		b.steady = smooth(b.steady, s.P99, steadyAlpha)
	}
	p99 := b.p99.Round(100 * time.Microsecond)
	// The slowdown moves cause: the worse of this round's p99 and the
	// smoothed one, so the rate reacts within a round and one quiet
	// round does not let it grow.
	slowdown := 0.0
	if b.steady > 0 {
		slowdown = float64(max(b.p99, s.P99))/float64(b.steady) - 1
	}
	switch {
	case s.Overloaded:
		b.rate = max(b.rate, c.Urgent)
		reason = fmt.Sprintf("the cluster refuses requests while new nodes take data: migration at %s to end the overload sooner", MiBps(b.rate))
	case float64(s.P99) > c.High*float64(slo) || s.Queue > c.QueueHigh:
		b.rate = max(c.Min, b.rate*c.Decrease)
		reason = fmt.Sprintf("foreground p99 %v (queue %.0f%%) is near the %v SLO: migration cut to %s", s.P99.Round(100*time.Microsecond), 100*s.Queue, slo, MiBps(b.rate))
	case s.Moving && !s.Urgent && slowdown > c.MaxSlowdown:
		b.rate = max(c.Min, b.rate*c.Decrease)
		b.start = min(b.start, b.rate)
		reason = fmt.Sprintf("foreground p99 %v is %.0f%% above its steady %v while data moves: migration cut to %s", p99, 100*slowdown, b.steady.Round(100*time.Microsecond), MiBps(b.rate))
	case float64(b.p99) < c.Low*float64(slo) && s.Moving && (s.Urgent || slowdown <= c.MaxSlowdown/2):
		if !s.Urgent {
			b.start = b.rate // this rate kept p99 within half the slowdown
		}
		b.rate = min(c.Max, b.rate+c.Step)
		reason = fmt.Sprintf("foreground p99 %v is well under the %v SLO while data moves: migration may use %s", p99, slo, MiBps(b.rate))
	case !s.Moving && b.rate > b.start:
		b.rate = b.start
		reason = fmt.Sprintf("no data moves: the next moves start again at %s", MiBps(b.rate))
	default:
		reason = fmt.Sprintf("foreground p99 %v against the %v SLO: migration held at %s", p99, slo, MiBps(b.rate))
	}
	return b.rate, reason
}

func smooth(old, x time.Duration, alpha float64) time.Duration {
	if old == 0 {
		return x
	}
	return time.Duration(alpha*float64(x) + (1-alpha)*float64(old))
}

// MiBps formats a rate in bytes/s.
func MiBps(bytesPerSec float64) string { return fmt.Sprintf("%.0f MiB/s", bytesPerSec/(1<<20)) }
