package elastic

import (
	"errors"
	"fmt"
	"time"
)

// Controllers the planner can run: static never scales; reactive acts on
// what it sees; proactive on what it forecasts; combined on both, leaning
// on the reactive rule when the forecast has been wrong.
const (
	Static    = "static"
	Reactive  = "reactive"
	Proactive = "proactive"
	Combined  = "combined"
)

// Policy holds every elasticity knob, with units in the names or types.
type Policy struct {
	// Enabled turns scaling on; the bandwidth controller runs regardless.
	Enabled bool
	// Controller is static, reactive, proactive or combined.
	Controller string
	// Actuator names how nodes are started and stopped: local,
	// kubernetes or manual.
	Actuator string
	// SLOP99 is the foreground p99 the cluster must stay under.
	SLOP99 time.Duration
	// TargetUtilization is the share of a node's capacity at the SLO the
	// planner fills: the headroom for forecast error and bursts.
	TargetUtilization float64
	// MinNodes and MaxNodes bound the node count (never below the
	// replication factor either).
	MinNodes, MaxNodes int
	// Horizon is how far past a new node's lead time the planner looks at
	// the forecast.
	Horizon time.Duration
	// Season is the load's period for the forecaster (0: no season).
	Season time.Duration
	// NodeStartTime is how long a new node takes from the actuator's call
	// to serving, before any data moves to it.
	NodeStartTime time.Duration
	// ReactAfter is how many rounds in a row p99 or utilisation must stay
	// beyond their thresholds before the reactive rule adds nodes.
	ReactAfter int
	// ReactUtilization is the utilisation (of capacity at the SLO) above
	// which a round counts as overloaded for the reactive rule.
	ReactUtilization float64
	// ScaleInAfter is how long the load must fit in one node fewer, with
	// the target utilisation, before a node is removed.
	ScaleInAfter time.Duration
	// CoolDown is the least time after a scaling action before a scale-in.
	CoolDown time.Duration
	// MaxForecastError: above this relative error the combined controller
	// ignores the forecast and runs on the reactive rule alone.
	MaxForecastError float64
	// IgnoreInterference plans as if every node had its peers' capacity
	// (the plain planner, for comparison).
	IgnoreInterference bool
	// NodeCapacity (requests/s at full utilisation) and IdleP99 are the
	// capacity model's priors until it has learned from samples.
	NodeCapacity float64
	IdleP99      time.Duration
	// NoticeableShare is the least share of an even split of the round's
	// requests (offered ÷ serving nodes) a node must take for its samples
	// to count (Noticeable): below it its p99 is not the cluster's (an
	// idle node's tail says nothing) and the capacity model does not
	// learn from it. A node that only follows spends its CPU applying its
	// leaders' writes while it serves a trickle, so requests over CPU
	// would learn it at a few percent of its peers, lease balance (which
	// weighs nodes by that capacity) would give it no lease, and it would
	// never be measured again (issue 34).
	NoticeableShare float64
	// Bandwidth tunes the migration-rate controller.
	Bandwidth BandwidthConfig
	// Overflow tunes how cache key spaces that grow when full ask for
	// nodes ahead of need and shed data from full nodes.
	Overflow OverflowConfig
}

// BandwidthConfig tunes the migration-rate controller (bytes/s).
type BandwidthConfig struct {
	// Min is the floor: moves always progress. Max is the ceiling when
	// foreground is light. Urgent is the least rate while new nodes take
	// data and the SLO is already lost. (The rate before any feedback is
	// the runner's configured MigrationRate.)
	Min, Max, Urgent float64
	// Step is the additive increase per round while p99 is below
	// Low × SLO; the rate is multiplied by Decrease while p99 is above
	// High × SLO (or the admission queue is above QueueHigh).
	Step      float64
	Decrease  float64
	Low, High float64
	QueueHigh float64
	// MaxSlowdown is how much above its steady value (p99 while nothing
	// moves) foreground p99 may rise because of moves: above it the rate
	// is cut, below half of it the rate may grow.
	MaxSlowdown float64
}

// DefaultPolicy is scaling disabled, with the manual actuator (a server
// starts no process and calls no API unless told to), and settings that
// suit nodes on one machine: a 25 ms p99 SLO, 70% target utilisation,
// 1 to 9 nodes.
func DefaultPolicy() Policy {
	return Policy{
		Controller:        Combined,
		Actuator:          "manual",
		SLOP99:            25 * time.Millisecond,
		TargetUtilization: 0.7,
		MinNodes:          1,
		MaxNodes:          9,
		Horizon:           30 * time.Second,
		NodeStartTime:     10 * time.Second,
		ReactAfter:        3,
		ReactUtilization:  0.9,
		ScaleInAfter:      2 * time.Minute,
		CoolDown:          time.Minute,
		MaxForecastError:  0.3,
		NodeCapacity:      5000,
		IdleP99:           2 * time.Millisecond,
		NoticeableShare:   0.1,
		Bandwidth:         DefaultBandwidthConfig(),
		Overflow:          DefaultOverflowConfig(),
	}
}

// DefaultBandwidthConfig moves data at up to 256 MiB/s when foreground
// is light and never below 4 MiB/s.
func DefaultBandwidthConfig() BandwidthConfig {
	return BandwidthConfig{Min: 4 << 20, Max: 256 << 20, Urgent: 128 << 20, Step: 16 << 20,
		Decrease: 0.5, Low: 0.5, High: 0.8, QueueHigh: 0.5, MaxSlowdown: 0.1}
}

// Validate reports the first setting that cannot work, as one sentence;
// rf is the cluster's replication factor (MaxNodes may not be below it).
func (p Policy) Validate(rf int) error {
	switch {
	case p.Controller != Static && p.Controller != Reactive && p.Controller != Proactive && p.Controller != Combined:
		return fmt.Errorf("unknown controller %q (want static, reactive, proactive or combined)", p.Controller)
	case p.Actuator != "local" && p.Actuator != "kubernetes" && p.Actuator != "manual":
		return fmt.Errorf("unknown actuator %q (want local, kubernetes or manual)", p.Actuator)
	case p.SLOP99 <= 0:
		return errors.New("the p99 SLO must be positive")
	case p.IdleP99 <= 0 || p.IdleP99 >= p.SLOP99:
		return fmt.Errorf("the idle p99 prior (%v) must be positive and below the SLO (%v)", p.IdleP99, p.SLOP99)
	case !(p.TargetUtilization > 0 && p.TargetUtilization <= 1):
		return fmt.Errorf("target utilization %v must be in (0, 1]", p.TargetUtilization)
	case !(p.ReactUtilization > 0 && p.ReactUtilization <= 1.5):
		return fmt.Errorf("reactive utilization threshold %v must be in (0, 1.5]", p.ReactUtilization)
	case p.MinNodes < 1:
		return fmt.Errorf("min nodes %d must be at least 1", p.MinNodes)
	case p.MaxNodes < p.MinNodes:
		return fmt.Errorf("min nodes %d is above max nodes %d", p.MinNodes, p.MaxNodes)
	case p.MaxNodes < rf:
		return fmt.Errorf("max nodes %d is below the replication factor %d", p.MaxNodes, rf)
	case p.Horizon < 0 || p.Season < 0 || p.NodeStartTime < 0 || p.ScaleInAfter < 0 || p.CoolDown < 0:
		return errors.New("horizon, season, node start time, scale-in delay and cool-down may not be negative")
	case p.ReactAfter < 1:
		return fmt.Errorf("react-after %d must be at least 1 round", p.ReactAfter)
	case !(p.MaxForecastError > 0):
		return errors.New("the maximum forecast error must be positive")
	case !(p.NodeCapacity > 0):
		return errors.New("the node capacity prior must be positive")
	case !(p.NoticeableShare > 0 && p.NoticeableShare < 1):
		return fmt.Errorf("the noticeable share %v must be in (0, 1)", p.NoticeableShare)
	}
	if err := p.Bandwidth.Validate(); err != nil {
		return err
	}
	return p.Overflow.Validate()
}

// Validate reports a bandwidth setting that cannot work.
func (b BandwidthConfig) Validate() error {
	switch {
	case !(b.Min > 0) || b.Max < b.Min || b.Urgent < b.Min || b.Urgent > b.Max:
		return fmt.Errorf("migration bandwidth needs 0 < min ≤ urgent ≤ max (min %s, urgent %s, max %s)", MiBps(b.Min), MiBps(b.Urgent), MiBps(b.Max))
	case !(b.Step > 0) || !(b.Decrease > 0 && b.Decrease < 1):
		return errors.New("migration bandwidth step must be positive and its decrease factor in (0, 1)")
	case !(b.Low > 0 && b.Low < b.High) || !(b.QueueHigh > 0) || !(b.MaxSlowdown > 0):
		return errors.New("migration bandwidth thresholds need 0 < low < high, a positive queue threshold and a positive maximum slowdown")
	}
	return nil
}

// Noticeable reports whether a node that took requests (served and
// refused, per second) of the round's offered load, over serving nodes,
// takes at least NoticeableShare of an even split.
func (p Policy) Noticeable(requests, offered float64, serving int) bool {
	return serving > 0 && requests > 0 && requests >= p.NoticeableShare*offered/float64(serving)
}

// MinServing is the least node count the planner may choose.
func (p Policy) MinServing(rf int) int { return max(p.MinNodes, rf, 1) }
