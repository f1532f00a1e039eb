package raftstore

import "sync/atomic"

// Stats are the store's cumulative work counters, read by metrics. Updated
// with single atomic adds so the scheduler pays next to nothing.
type Stats struct {
	// Rounds counts scheduler rounds that handled at least one Ready.
	Rounds atomic.Uint64
	// Syncs counts synced (fsync'd) Raft state batches; SyncNanos is the
	// time they took in total.
	Syncs     atomic.Uint64
	SyncNanos atomic.Uint64
	// EntriesAppended counts log entries written; EntriesCommitted counts
	// committed entries handed to the state machine.
	EntriesAppended  atomic.Uint64
	EntriesCommitted atomic.Uint64
	// Readies counts Readies taken from replicas; LogBatches the log
	// writer's engine batches (each holds every write pending when it
	// began, synced or not); ApplyBatches the apply stage's engine
	// batches (one per round that applied anything). With Syncs and the
	// entry counts they say how much the closed loop batches, which is
	// what each piece's cost per write depends on (docs/benchmarks/cost.md,
	// "The floor of the pieces we keep"); they are metrics too.
	Readies, LogBatches, ApplyBatches atomic.Uint64
	// CommandsProposed counts commands handed to Raft, EntriesProposed the
	// entries that carried them (proposal batching shares an entry).
	CommandsProposed, EntriesProposed atomic.Uint64
	// MessagesSent counts Raft messages handed to the transport;
	// MessagesDropped those it refused (queue full, peer unknown).
	MessagesSent    atomic.Uint64
	MessagesDropped atomic.Uint64
	// Snapshots sent and received, and their SST bytes.
	SnapshotsSent         atomic.Uint64
	SnapshotBytesSent     atomic.Uint64
	SnapshotsReceived     atomic.Uint64
	SnapshotBytesReceived atomic.Uint64
	// SnapshotThrottleNanos is the time snapshot senders spent waiting
	// under Config.SnapshotBytesPerSecond, summed over concurrent sends.
	SnapshotThrottleNanos atomic.Uint64
	// SnapshotsRefusedOverlap counts snapshots refused because they
	// overlap a local replica that is still a member of its range (or
	// could not be checked); StaleReplicasRemoved counts replicas the
	// replica GC destroyed.
	SnapshotsRefusedOverlap atomic.Uint64
	StaleReplicasRemoved    atomic.Uint64
	// ReplicasLost counts replicas that lost their data with a restart
	// (a memory range), RangesReset the resets of ranges whose voters all
	// did, LostReplicasReplaced the lost replicas a leader replaced with
	// fresh ones (volatile.go).
	ReplicasLost, RangesReset, LostReplicasReplaced atomic.Uint64
	// MessagesMisaddressed counts Raft messages and snapshots dropped
	// because they were sent to another node ID: a node started afresh at
	// a replaced node's address must not take over its replicas.
	MessagesMisaddressed atomic.Uint64
	// MVCC GC (mvccgc.go): passes this node's leaseholders completed; GC
	// commands its replicas applied, and the versions and their bytes
	// those removed.
	GCPasses          atomic.Uint64
	GCCommandsApplied atomic.Uint64
	GCVersionsRemoved atomic.Uint64
	GCBytesRemoved    atomic.Uint64
}

// countProposed counts an entry of n commands handed to Raft.
func (s *Stats) countProposed(n int) {
	s.CommandsProposed.Add(uint64(n))
	s.EntriesProposed.Add(1)
}

// Stats returns the store's live counters.
func (s *Store) Stats() *Stats { return &s.stats }
