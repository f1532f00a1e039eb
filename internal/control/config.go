package control

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the control loop's own knobs: how often it runs, when a
// silent node counts as dead, and the runner's limits. Policy thresholds
// live in placement.Config; elasticity in AutoscalePolicy.
type Config struct {
	// Interval is how often a round runs.
	Interval time.Duration
	// DeadNodeGrace is how long a node may stay unreachable before
	// placement treats it as dead and replaces its replicas.
	DeadNodeGrace time.Duration
	// Runner limits how operators execute.
	Runner RunnerConfig
	// NoteEvery is how often the same placement note is recorded again.
	NoteEvery time.Duration
	// StateEvery is how often the elasticity controller's State is
	// stored (the server: in the meta range) while no scale operation
	// starts or ends; one that does is stored in the same round.
	StateEvery time.Duration
}

// DefaultConfig suits a small cluster on one machine.
func DefaultConfig() Config {
	return Config{
		Interval:      time.Second,
		DeadNodeGrace: 20 * time.Second,
		Runner:        DefaultRunnerConfig(),
		NoteEvery:     5 * time.Minute,
		StateEvery:    10 * time.Second,
	}
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	if c.Interval <= 0 || c.DeadNodeGrace <= 0 || c.NoteEvery <= 0 || c.StateEvery <= 0 {
		return errors.New("control: interval, dead-node grace, note interval and state interval must be positive")
	}
	return c.Runner.Validate()
}

// RunnerConfig limits how operators execute.
type RunnerConfig struct {
	// MaxInFlight is the most operators running at once, cluster-wide.
	MaxInFlight int
	// MaxSnapshotsPerNode is the most data-moving operators (replica adds
	// and moves) at once that send data to the same node.
	MaxSnapshotsPerNode int
	// OpsPerMinute is the most operators started per minute, cluster-wide,
	// splits by size or at key space boundaries excepted (Paced).
	OpsPerMinute int
	// OpTimeout bounds one operator (a replica move copies a whole range).
	OpTimeout time.Duration
	// MigrationRate is the snapshot bandwidth (bytes/s) each node may use,
	// sent or received, when no bandwidth controller sets it.
	MigrationRate float64
	// RecentWindow is how long finished operators are remembered for the
	// policies' cool-downs; at least placement's lease return-after (a
	// lease is not moved back to a node it left within it), or that rule
	// forgets a move before its window ends.
	RecentWindow time.Duration
}

// DefaultRunnerConfig suits a small cluster on one machine.
func DefaultRunnerConfig() RunnerConfig {
	return RunnerConfig{MaxInFlight: 8, MaxSnapshotsPerNode: 2, OpsPerMinute: 120,
		OpTimeout: 2 * time.Minute, MigrationRate: 64 << 20, RecentWindow: 10 * time.Minute}
}

// Validate reports a limit that cannot work.
func (c RunnerConfig) Validate() error {
	if c.MaxInFlight < 1 || c.MaxSnapshotsPerNode < 1 || c.OpsPerMinute < 1 || c.OpTimeout <= 0 || c.MigrationRate <= 0 || c.RecentWindow <= 0 {
		return fmt.Errorf("control: runner limits must be positive: %+v", c)
	}
	return nil
}
