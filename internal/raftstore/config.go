package raftstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
)

// Config tunes a node's replicas. All replicas of a node share it.
type Config struct {
	// TickInterval is the period of one Raft logical clock tick.
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks (also the leader lease
	// length under CheckQuorum).
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat interval in ticks.
	HeartbeatTicks int
	// MaxSizePerMsg caps the bytes of entries in one append message.
	MaxSizePerMsg uint64
	// MaxInflightMsgs caps unacknowledged append messages per follower.
	MaxInflightMsgs int
	// MaxUncommittedBytes caps the bytes of proposed-but-uncommitted entries
	// per range; beyond it proposals fail with ErrOverloaded.
	MaxUncommittedBytes uint64
	// MaxPendingProposals caps queued proposals per replica (count).
	MaxPendingProposals int
	// LogKeepEntries is how many applied entries each replica keeps in its
	// log for slow followers; the log is truncated once it holds twice that.
	// Entries every replica holds are truncated sooner, whatever this is
	// (maybeTruncateLogLocked).
	LogKeepEntries uint64
	// SnapshotDir is where SST files of outgoing and incoming snapshots are
	// staged.
	SnapshotDir string
	// MaxConcurrentSnapshotSends caps snapshots this node streams at once.
	MaxConcurrentSnapshotSends int
	// SnapshotBytesPerSecond caps the bandwidth of all outgoing snapshots
	// of this store together, in bytes per second, so that rebalancing or
	// repair cannot starve foreground Raft traffic. Bursts of up to one
	// snapshot chunk (1 MiB) pass at once. 0 means unlimited; DefaultConfig
	// sets 64 MiB/s.
	SnapshotBytesPerSecond int64
	// ReplicationFactor is the number of voters a range should have; manual
	// removals never go below it.
	ReplicationFactor int
	// ReplicationFactorOf, if set, is the replication factor of the range
	// starting at start when it is not ReplicationFactor (its key space's:
	// 0 means ReplicationFactor).
	ReplicationFactorOf func(start []byte) int
	// CatchUpTimeout bounds how long a replica change waits for a new
	// learner to catch up before giving up.
	CatchUpTimeout time.Duration
	// Clock is the wall clock closed timestamps are measured by; nil is the
	// system clock (fault injection passes a SkewClock). Leases use the
	// monotonic clock instead (clock.go).
	Clock Clock
	// MaxClockOffset is the most any two nodes' wall clocks may differ,
	// the same on every node: the store's hybrid logical clock refuses
	// remote timestamps further ahead, and a node further than 0.8 × this
	// from a majority of its peers holds no leases (SetClockTrusted). It
	// must stay under half the election timeout (validateMaxClockOffset).
	MaxClockOffset time.Duration
	// MaxLogVersion is the newest log version the store may be raised to
	// (logversion.go); DefaultConfig sets LatestLogVersion. Tests lower it
	// to play an older binary.
	MaxLogVersion uint32
	// InitialLogVersion is the version a store starts at when its engine
	// has none persisted; 0 means LogVersionBase (a node that has not
	// heard the cluster's version yet proposes nothing newer). Tests of a
	// single store set LatestLogVersion.
	InitialLogVersion uint32
	// GCChunkVersions is the budget of one MVCC GC command: how many
	// versions its apply visits (mvccgc.go). It bounds how long one apply
	// holds the node's scheduler (docs/transactions.md step 4 has the
	// time); the proposer sets it in the command, so replicas agree.
	GCChunkVersions uint32
	// TestingStaleReads makes every replica serve reads from its local state
	// without the lease check. Only for the linearizability checker's
	// negative control; never set it in production.
	TestingStaleReads bool
	// TestingBreaks are deliberately broken transaction modes (breaks.go).
	TestingBreaks Breaks
	// testingEnteredJoint, when set, is called by a leader that has just
	// applied a replica change entering a joint configuration, with the
	// replica locked, before Raft proposes leaving it: tests act in the
	// window between entering and leaving.
	testingEnteredJoint func(*Replica)
	// testingLogWrite, when set, is called by each node's log writer at
	// each stage of a batch, with the batch (logwriter.go), on the
	// writer's goroutine: tests crash a node there.
	testingLogWrite func(node uint64, stage logWriteStage, ws []logWrite)
	// testingApplied, when set, is called as each entry is applied (or
	// skipped, a removed replica's), with the replica locked: tests audit
	// what is applied when.
	testingApplied func(node, rangeID, index uint64)
}

// DefaultConfig returns the settings for a local cluster on one machine.
func DefaultConfig() Config {
	return Config{
		TickInterval:               100 * time.Millisecond,
		ElectionTicks:              10,
		HeartbeatTicks:             2,
		MaxSizePerMsg:              1 << 20,
		MaxInflightMsgs:            256,
		MaxUncommittedBytes:        64 << 20,
		MaxPendingProposals:        10000,
		LogKeepEntries:             2000,
		MaxConcurrentSnapshotSends: 2,
		SnapshotBytesPerSecond:     64 << 20,
		ReplicationFactor:          3,
		CatchUpTimeout:             60 * time.Second,
		MaxClockOffset:             hlc.DefaultMaxOffset,
		MaxLogVersion:              LatestLogVersion,
		GCChunkVersions:            10_000,
	}
}

// Validate rejects settings that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.TickInterval <= 0:
		return errors.New("raftstore: TickInterval must be positive")
	case c.HeartbeatTicks <= 0:
		return errors.New("raftstore: HeartbeatTicks must be positive")
	case c.ElectionTicks <= c.HeartbeatTicks:
		return errors.New("raftstore: ElectionTicks must exceed HeartbeatTicks")
	case c.ElectionTicks < 4:
		return errors.New("raftstore: ElectionTicks must be at least 4 (a lease lasts half an election timeout less one tick)")
	case c.MaxSizePerMsg == 0 || c.MaxInflightMsgs <= 0 || c.MaxUncommittedBytes == 0:
		return errors.New("raftstore: message and inflight limits must be positive")
	case c.MaxPendingProposals <= 0:
		return errors.New("raftstore: MaxPendingProposals must be positive")
	case c.LogKeepEntries == 0:
		return errors.New("raftstore: LogKeepEntries must be positive")
	case c.SnapshotDir == "":
		return errors.New("raftstore: SnapshotDir is required")
	case c.MaxConcurrentSnapshotSends <= 0:
		return errors.New("raftstore: MaxConcurrentSnapshotSends must be positive")
	case c.SnapshotBytesPerSecond < 0:
		return errors.New("raftstore: SnapshotBytesPerSecond must not be negative (0 means unlimited)")
	case c.ReplicationFactor <= 0:
		return errors.New("raftstore: ReplicationFactor must be positive")
	case c.CatchUpTimeout <= 0:
		return errors.New("raftstore: CatchUpTimeout must be positive")
	case c.MaxLogVersion < LogVersionBase || c.MaxLogVersion > LatestLogVersion:
		return fmt.Errorf("raftstore: MaxLogVersion %d is not a version this binary applies (%d to %d)", c.MaxLogVersion, LogVersionBase, LatestLogVersion)
	case c.GCChunkVersions == 0:
		return errors.New("raftstore: GCChunkVersions must be positive")
	case c.InitialLogVersion > c.MaxLogVersion:
		return fmt.Errorf("raftstore: InitialLogVersion %d exceeds MaxLogVersion %d", c.InitialLogVersion, c.MaxLogVersion)
	}
	return c.ValidateMaxClockOffset()
}

// ValidateMaxClockOffset refuses a maximum clock offset that breaks the
// lease argument (docs/transactions.md, "Max offset and leases"): after a
// lease lapses, half an election timeout passes before another node's
// lease starts, and a new leaseholder's clock must be past every
// timestamp the old one served by then, with 0.8 of that as the margin for
// clock rates.
func (c *Config) ValidateMaxClockOffset() error {
	limit := c.electionTimeout() / 2 / 5 * 4
	if c.MaxClockOffset <= 0 || c.MaxClockOffset > limit {
		return fmt.Errorf("raftstore: the maximum clock offset must be positive and at most %v (0.8 × half the %v election timeout, so that a new leaseholder's clock is past every read its predecessor served), not %v",
			limit, c.electionTimeout(), c.MaxClockOffset)
	}
	return nil
}

// electionTimeout is the election timeout as a duration.
func (c Config) electionTimeout() time.Duration {
	return time.Duration(c.ElectionTicks) * c.TickInterval
}

// leaseDuration is how long a lease lasts from the quorum's contact: it
// ends half an election timeout before a follower that heard that contact
// can vote for another leader, which is one tick short of an election
// timeout after it (lease.go).
func (c Config) leaseDuration() time.Duration {
	return c.electionTimeout()/2 - c.TickInterval
}
