package elastic

import (
	"fmt"
	"time"
)

// Bandwidth sets the migration rate each round: additive increase while
// foreground p99 is well under the SLO, multiplicative decrease when it
// nears it (or the admission queue fills), never below the floor so data
// moves always progress. Between the two thresholds it holds.
type Bandwidth struct {
	cfg  BandwidthConfig
	rate float64
}

// NewBandwidth starts at initial (bytes/s), clamped into cfg's limits.
func NewBandwidth(cfg BandwidthConfig, initial float64) *Bandwidth {
	return &Bandwidth{cfg: cfg, rate: min(max(initial, cfg.Min), cfg.Max)}
}

// SetConfig changes the limits; the rate is clamped into them.
func (b *Bandwidth) SetConfig(cfg BandwidthConfig) {
	b.cfg = cfg
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
	// Overloaded: requests are refused for lack of capacity while new
	// nodes take data. Throttling migration cannot save the SLO then; it
	// would only keep the overload longer.
	Overloaded bool
}

// Decide adjusts the rate from this round's signals against slo and
// says why.
func (b *Bandwidth) Decide(s Signals, slo time.Duration) (rate float64, reason string) {
	c := b.cfg
	p99 := s.P99.Round(100 * time.Microsecond)
	switch {
	case s.Overloaded:
		b.rate = max(b.rate, c.Urgent)
		reason = fmt.Sprintf("the cluster refuses requests while new nodes take data: migration at %s to end the overload sooner", MiBps(b.rate))
	case float64(s.P99) > c.High*float64(slo) || s.Queue > c.QueueHigh:
		b.rate = max(c.Min, b.rate*c.Decrease)
		reason = fmt.Sprintf("foreground p99 %v (queue %.0f%%) is near the %v SLO: migration cut to %s", p99, 100*s.Queue, slo, MiBps(b.rate))
	case float64(s.P99) < c.Low*float64(slo) && s.Moving:
		b.rate = min(c.Max, b.rate+c.Step)
		reason = fmt.Sprintf("foreground p99 %v is well under the %v SLO while data moves: migration may use %s", p99, slo, MiBps(b.rate))
	default:
		reason = fmt.Sprintf("foreground p99 %v against the %v SLO: migration held at %s", p99, slo, MiBps(b.rate))
	}
	return b.rate, reason
}

// MiBps formats a rate in bytes/s.
func MiBps(bytesPerSec float64) string { return fmt.Sprintf("%.0f MiB/s", bytesPerSec/(1<<20)) }
