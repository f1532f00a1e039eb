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

// NewBandwidth starts at cfg.Initial.
func NewBandwidth(cfg BandwidthConfig) *Bandwidth { return &Bandwidth{cfg: cfg, rate: cfg.Initial} }

// SetConfig changes the limits; the rate is clamped into them.
func (b *Bandwidth) SetConfig(cfg BandwidthConfig) {
	b.cfg = cfg
	b.rate = min(max(b.rate, cfg.Min), cfg.Max)
}

// Rate is the allowance now (bytes/s per node).
func (b *Bandwidth) Rate() float64 { return b.rate }

// Decide adjusts the rate from this round's worst foreground p99 and
// admission-queue occupancy, and says why.
func (b *Bandwidth) Decide(p99, slo time.Duration, queue float64) (rate float64, reason string) {
	c := b.cfg
	switch {
	case float64(p99) > c.High*float64(slo) || queue > c.QueueHigh:
		b.rate = max(c.Min, b.rate*c.Decrease)
		reason = fmt.Sprintf("foreground p99 %v (queue %.0f%%) is near the %v SLO: migration cut to %s", p99.Round(100*time.Microsecond), 100*queue, slo, MiBps(b.rate))
	case float64(p99) < c.Low*float64(slo):
		b.rate = min(c.Max, b.rate+c.Step)
		reason = fmt.Sprintf("foreground p99 %v is well under the %v SLO: migration may use %s", p99.Round(100*time.Microsecond), slo, MiBps(b.rate))
	default:
		reason = fmt.Sprintf("foreground p99 %v is close to the %v SLO: migration held at %s", p99.Round(100*time.Microsecond), slo, MiBps(b.rate))
	}
	return b.rate, reason
}

// MiBps formats a rate in bytes/s.
func MiBps(bytesPerSec float64) string { return fmt.Sprintf("%.0f MiB/s", bytesPerSec/(1<<20)) }
