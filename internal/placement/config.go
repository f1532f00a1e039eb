package placement

import (
	"errors"
	"fmt"
	"time"
)

// Config tunes the placement policies. Sizes are bytes, rates requests per
// second, shares fractions in [0,1].
type Config struct {
	// ReplicationFactor is the number of voters each range should have.
	ReplicationFactor int
	// Rebalance enables everything beyond keeping data safe: splits,
	// merges, adaptive replicas, bootstrap, replica and lease balance.
	// Off, placement only repairs, keeps the replication factor and
	// drains decommissioned nodes (an operator moving things by hand).
	Rebalance bool
	// Merges enables range merges (with Rebalance).
	Merges bool
	// RangeMaxBytes (Θmax): the most a range holds. It splits, at the
	// key halving it, once above SplitFill × Θmax, and writes to it wait
	// for that split near Θmax (server.Config.SplitBackpressure).
	RangeMaxBytes uint64
	// SplitFill is the share of Θmax above which a range splits by size,
	// in (0.5, 1]: below 1, a range written faster than a split takes
	// (a few hundred ms) splits before it is full, and stays within Θmax.
	SplitFill float64
	// RangeMinBytes (Θmin): two adjacent ranges smaller together merge.
	// Θmax ≥ 2·Θmin so a merged range never immediately splits again.
	RangeMinBytes uint64
	// MergeCooldown: no merge of a range that split more recently.
	MergeCooldown time.Duration
	// MinRanges: merges never take the cluster below this many ranges.
	MinRanges int
	// SplitQPS: a range serving more requests per second (averaged over the
	// reporting window) splits at its load-weighted median key...
	SplitQPS float64
	// ...unless one key takes at least HotKeyShare of its requests: then no
	// split helps and adaptive replicas are the answer.
	HotKeyShare float64
	// LoadSplitSlack: with two or more live nodes, when even the best lease
	// placement of the ranges leaves a node above (1+LoadSplitSlack) × the
	// mean node load, the hottest range splits by load (if it serves at
	// least LoadSplitMinQPS), below SplitQPS: a few hot ranges are cut
	// until leases can spread them. 0 turns this off.
	LoadSplitSlack  float64
	LoadSplitMinQPS float64
	// MoveMargin and MinMoveQPS: a lease moves for load only when the
	// projected maximum node load drops by more than MoveMargin × the mean
	// node load and more than MinMoveQPS (what a sample's noise can
	// explain), and the spread of node loads drops too.
	MoveMargin float64
	MinMoveQPS float64
	// RangeCooldown: a range that completed an operator this recently is
	// not moved for balance (its load sample belongs to the old layout).
	// NodeCooldown: a node that gave or received a lease or replica this
	// recently takes no part in a load-based lease move.
	RangeCooldown, NodeCooldown time.Duration
	// Lease tunes when a lease follows its writers (with Rebalance).
	Lease LeaseConfig
	// BalanceTolerance: replica counts per node stay within
	// max(1, BalanceTolerance·mean) of the mean.
	BalanceTolerance float64
	// LeaseTolerance: lease counts per node stay within
	// max(1, LeaseTolerance·share) of the node's share (the mean, or with
	// measured capacities that differ, the mean × its capacity weight).
	LeaseTolerance float64
	// CapacityDeadband: a node whose measured capacity (Node.Capacity) is
	// within this fraction of the live nodes' mean counts at the mean, so
	// nodes that differ by what measurement noise and ordinary drift
	// explain share leases evenly and the shares do not follow the noise.
	CapacityDeadband float64
	// BootstrapShare: a new node's phase 1 takes this share of replicas
	// from heavily loaded nodes (and their leases) so it serves at once.
	BootstrapShare float64
	// HeavyCPU and HeavyFactor: a node is heavily loaded when its CPU is
	// above HeavyCPU and its QPS above HeavyFactor × the mean.
	HeavyCPU, HeavyFactor float64
	// AdaptiveReadQPS: a range reading more than this gets extra learner
	// replicas (up to MaxAdaptiveReplicas) serving bounded/any reads; they
	// go once its reads fall below half of it, the reads its other
	// replicas served having stayed there for RangeCooldown.
	AdaptiveReadQPS     float64
	MaxAdaptiveReplicas int
	// MaxOps bounds the operators one decision returns (the runner has its
	// own rate limits on top).
	MaxOps int
	// LearnerGrace is how long a plain learner may sit on a range that has
	// all its voters, with no replica change reported running, before it
	// counts as left over by an interrupted change and is removed (the
	// leaseholder rolls back its own failed changes at once; this catches
	// the changes of leaseholders that died or lost the lease).
	LearnerGrace time.Duration
	// SurplusGrace is how long a range keeps a voter beyond its replication
	// factor, counted from when the newest voter was first seen with no
	// change reported running, before one is removed: an operator's
	// add-replica then remove-replica picks which one goes, instead of
	// racing the trim.
	SurplusGrace time.Duration
}

// DefaultConfig is tuned for a small cluster on one machine.
func DefaultConfig() Config {
	return Config{
		ReplicationFactor:   3,
		Rebalance:           true,
		Merges:              true,
		RangeMaxBytes:       64 << 20,
		SplitFill:           0.875,
		RangeMinBytes:       16 << 20,
		MergeCooldown:       5 * time.Minute,
		MinRanges:           1,
		SplitQPS:            2500,
		HotKeyShare:         0.8,
		LoadSplitSlack:      0.25,
		LoadSplitMinQPS:     1000,
		MoveMargin:          0.1,
		MinMoveQPS:          100,
		RangeCooldown:       30 * time.Second,
		NodeCooldown:        10 * time.Second,
		Lease:               DefaultLeaseConfig(),
		BalanceTolerance:    0.05,
		LeaseTolerance:      0.1,
		CapacityDeadband:    0.2,
		BootstrapShare:      0.1,
		HeavyCPU:            0.5,
		HeavyFactor:         1.2,
		AdaptiveReadQPS:     2000,
		MaxAdaptiveReplicas: 2,
		MaxOps:              8,
		LearnerGrace:        5 * time.Second,
		SurplusGrace:        10 * time.Second,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("replication factor must be at least 1, got %d", c.ReplicationFactor))
	}
	if c.RangeMinBytes == 0 || c.RangeMaxBytes < 2*c.RangeMinBytes {
		errs = append(errs, fmt.Errorf("need range-max ≥ 2·range-min > 0 so splits and merges cannot oscillate, got max %d min %d", c.RangeMaxBytes, c.RangeMinBytes))
	}
	if !(c.SplitFill > 0.5 && c.SplitFill <= 1) {
		errs = append(errs, fmt.Errorf("range-split-fill must be in (0.5, 1] so a split range's halves stay above range-min, got %v", c.SplitFill))
	}
	if c.RangeCooldown < 0 || c.NodeCooldown < 0 || c.MoveMargin < 0 || c.MinMoveQPS < 0 || c.LoadSplitMinQPS < 0 {
		errs = append(errs, errors.New("range and node cool-downs, move margin, min move qps and load-split min qps must be ≥ 0"))
	}
	if c.MergeCooldown < 0 || c.MinRanges < 1 || c.MaxOps < 1 || c.LearnerGrace <= 0 || c.SurplusGrace < 0 {
		errs = append(errs, errors.New("merge cooldown and surplus grace must be ≥ 0, min ranges and max ops ≥ 1, learner grace > 0"))
	}
	for name, f := range map[string]float64{"hot key share": c.HotKeyShare, "balance tolerance": c.BalanceTolerance,
		"lease tolerance": c.LeaseTolerance, "bootstrap share": c.BootstrapShare, "heavy CPU": c.HeavyCPU, "capacity deadband": c.CapacityDeadband} {
		if f < 0 || f > 1 {
			errs = append(errs, fmt.Errorf("%s must be in [0,1], got %v", name, f))
		}
	}
	if c.SplitQPS <= 0 || c.LoadSplitSlack < 0 || c.AdaptiveReadQPS <= 0 || c.HeavyFactor < 1 || c.MaxAdaptiveReplicas < 0 {
		errs = append(errs, errors.New("split and adaptive thresholds must be positive, load split slack ≥ 0, heavy factor ≥ 1, max adaptive replicas ≥ 0"))
	}
	if err := c.Lease.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("placement: %w", errors.Join(errs...))
	}
	return nil
}

// SplitBytes is the size above which a range splits: SplitFill × Θmax.
func (c Config) SplitBytes() uint64 { return uint64(c.SplitFill * float64(c.RangeMaxBytes)) }
