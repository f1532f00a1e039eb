package metrics

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/internal/monitor"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Node is what the scrape-time gauges read of the node. Each method is
// called on a scrape, never on the request path.
type Node interface {
	// Replicas counts the node's replicas and the leases among them.
	Replicas() (replicas, leases int)
	// SnapshotRate is the migration allowance in bytes per second.
	SnapshotRate() float64
	// MemoryKeySpaces counts the key spaces kept in memory engines.
	MemoryKeySpaces() int
	// AutoscaleTarget is the node count the elasticity controller wants
	// (0 unless the node holds the meta lease).
	AutoscaleTarget() int
	// Usage is the resource monitor's latest sample (nil before one).
	Usage() *monitor.Snapshot
	// StoreStats are the store's counters (nil before the store opens).
	StoreStats() *raftstore.Stats
}

// RegisterNode exports the node's replica state, its resource use and the
// store's counters, computed at scrape time so the request path pays
// nothing.
func (m *Set) RegisterNode(n Node) {
	m.registerReplicaGauges(n)
	m.registerUsageGauges(n)
	m.registerStoreCounters(n)
}

func gaugeFunc(name, help string, fn func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
}

// registerReplicaGauges exports replica and lease counts, the migration
// allowance and the autoscaler's target.
func (m *Set) registerReplicaGauges(n Node) {
	m.Reg.MustRegister(
		gaugeFunc("tidekv_replicas", "Replicas on this node.", func() float64 { r, _ := n.Replicas(); return float64(r) }),
		gaugeFunc("tidekv_leases", "Ranges whose lease this node holds.", func() float64 { _, l := n.Replicas(); return float64(l) }),
		gaugeFunc("tidekv_migration_allowance_bytes_per_second", "The snapshot bandwidth this node may use now, as the bandwidth controller set it.",
			n.SnapshotRate),
		gaugeFunc("tidekv_memory_keyspaces", "Key spaces this node keeps in memory engines (it routes a memory key space once it learns of it).",
			func() float64 { return float64(n.MemoryKeySpaces()) }),
		gaugeFunc("tidekv_autoscale_target_nodes", "The node count the elasticity controller wants (exported by the meta leaseholder; 0 elsewhere).",
			func() float64 { return float64(n.AutoscaleTarget()) }),
	)
}

// registerUsageGauges exports the resource monitor's latest sample.
func (m *Set) registerUsageGauges(n Node) {
	usage := func(fn func(*monitor.Snapshot) float64) func() float64 {
		return func() float64 {
			if snap := n.Usage(); snap != nil {
				return fn(snap)
			}
			return 0
		}
	}
	m.Reg.MustRegister(
		gaugeFunc("tidekv_cpu_utilization", "Machine CPU busy fraction over the last sample interval.",
			usage(func(sn *monitor.Snapshot) float64 { return sn.Usage.CPU })),
		gaugeFunc("tidekv_process_cpu_utilization", "This process's share of the machine's CPU time over the last sample interval.",
			usage(func(sn *monitor.Snapshot) float64 { return sn.Usage.ProcessCPU })),
		gaugeFunc("tidekv_node_cpu_utilization", "The CPU utilisation the node reports and scores with: of its quota when it is sized, else its own share plus half of the rest of the machine's use.",
			usage(func(sn *monitor.Snapshot) float64 { return sn.Usage.NodeCPU() })),
		gaugeFunc("tidekv_cpu_quota_cpus", "The node's CPU size: its cgroup's quota in CPUs (0: not sized).",
			usage(func(sn *monitor.Snapshot) float64 { return sn.Usage.Quota.CPUs })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_cpu_throttled_seconds_total", Help: "Time the node's cgroup waited with its CPU quota used up."},
			usage(func(sn *monitor.Snapshot) float64 { return sn.Usage.Quota.ThrottledTime.Seconds() })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_cpu_throttled_periods_total", Help: "Quota periods in which the node's cgroup used its CPU quota up."},
			usage(func(sn *monitor.Snapshot) float64 { return float64(sn.Usage.Quota.Throttled) })),
		gaugeFunc("tidekv_memory_utilization", "Machine memory in use (1 - available/total).",
			usage(func(sn *monitor.Snapshot) float64 { return sn.Usage.Memory })),
		gaugeFunc("tidekv_disk_utilization", "Busiest disk's busy fraction over the last sample interval.",
			usage(func(sn *monitor.Snapshot) float64 { return sn.Usage.DiskIO })),
		gaugeFunc("tidekv_service_time_seconds", "Moving average of KV request service time.",
			usage(func(sn *monitor.Snapshot) float64 { return sn.Usage.ServiceTime.Seconds() })),
		gaugeFunc("tidekv_load_score", "The node's load score (lower is better; docs/monitor.md).",
			usage(func(sn *monitor.Snapshot) float64 { return sn.Score })),
	)
}

// registerStoreCounters exports the store's work counters.
func (m *Set) registerStoreCounters(n Node) {
	stat := func(v func(*raftstore.Stats) float64) func() float64 {
		return func() float64 {
			if st := n.StoreStats(); st != nil {
				return v(st)
			}
			return 0
		}
	}
	counter := func(name, help string, v func(*raftstore.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			stat(func(st *raftstore.Stats) float64 { return float64(v(st)) }))
	}
	m.Reg.MustRegister(
		counter("tidekv_raft_rounds_total", "Raft scheduler rounds that handled at least one Ready.",
			func(st *raftstore.Stats) uint64 { return st.Rounds.Load() }),
		counter("tidekv_raft_syncs_total", "Synced Raft state batches (group commits).",
			func(st *raftstore.Stats) uint64 { return st.Syncs.Load() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_raft_sync_seconds_total", Help: "Time spent in synced Raft state batches."},
			stat(func(st *raftstore.Stats) float64 { return time.Duration(st.SyncNanos.Load()).Seconds() })),
		counter("tidekv_raft_entries_appended_total", "Raft log entries written.",
			func(st *raftstore.Stats) uint64 { return st.EntriesAppended.Load() }),
		counter("tidekv_raft_entries_committed_total", "Committed Raft entries applied to the state machine.",
			func(st *raftstore.Stats) uint64 { return st.EntriesCommitted.Load() }),
		counter("tidekv_raft_readies_total", "Raft Readies taken from replicas.",
			func(st *raftstore.Stats) uint64 { return st.Readies.Load() }),
		counter("tidekv_raft_log_batches_total", "Engine batches the log writer wrote (each everything pending, synced or not).",
			func(st *raftstore.Stats) uint64 { return st.LogBatches.Load() }),
		counter("tidekv_raft_apply_batches_total", "Engine batches the apply stage committed (one per round that applied entries).",
			func(st *raftstore.Stats) uint64 { return st.ApplyBatches.Load() }),
		counter("tidekv_raft_commands_proposed_total", "Commands handed to Raft (writes, CAS, splits...).",
			func(st *raftstore.Stats) uint64 { return st.CommandsProposed.Load() }),
		counter("tidekv_raft_entries_proposed_total", "Raft entries proposed; batching shares one among several commands.",
			func(st *raftstore.Stats) uint64 { return st.EntriesProposed.Load() }),
		counter("tidekv_raft_messages_sent_total", "Raft messages handed to the transport.",
			func(st *raftstore.Stats) uint64 { return st.MessagesSent.Load() }),
		counter("tidekv_raft_messages_dropped_total", "Raft messages the transport refused (peer unknown or queue full).",
			func(st *raftstore.Stats) uint64 { return st.MessagesDropped.Load() }),
		counter("tidekv_snapshots_sent_total", "Range snapshots sent.",
			func(st *raftstore.Stats) uint64 { return st.SnapshotsSent.Load() }),
		counter("tidekv_snapshot_sent_bytes_total", "Snapshot SST bytes sent.",
			func(st *raftstore.Stats) uint64 { return st.SnapshotBytesSent.Load() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_snapshot_throttled_seconds_total", Help: "Time snapshot sends waited for the migration bandwidth cap."},
			stat(func(st *raftstore.Stats) float64 { return time.Duration(st.SnapshotThrottleNanos.Load()).Seconds() })),
		counter("tidekv_snapshots_received_total", "Range snapshots received.",
			func(st *raftstore.Stats) uint64 { return st.SnapshotsReceived.Load() }),
		counter("tidekv_snapshot_received_bytes_total", "Snapshot SST bytes received.",
			func(st *raftstore.Stats) uint64 { return st.SnapshotBytesReceived.Load() }),
		counter("tidekv_snapshots_refused_overlap_total", "Snapshots refused because they overlap a local replica that is still a member of its range.",
			func(st *raftstore.Stats) uint64 { return st.SnapshotsRefusedOverlap.Load() }),
		counter("tidekv_replicas_lost_total", "Replicas of memory key spaces whose data went with a restart of this node.",
			func(st *raftstore.Stats) uint64 { return st.ReplicasLost.Load() }),
		counter("tidekv_lost_replicas_replaced_total", "Replicas that lost their data with a restart and that a leader on this node replaced with fresh ones.",
			func(st *raftstore.Stats) uint64 { return st.LostReplicasReplaced.Load() }),
		counter("tidekv_lost_ranges_reset_total", "Replicas on this node emptied because every voter of their range lost its data with a restart.",
			func(st *raftstore.Stats) uint64 { return st.RangesReset.Load() }),
		counter("tidekv_gc_passes_total", "MVCC GC passes this node's leaseholders completed (each one or more GC commands).",
			func(st *raftstore.Stats) uint64 { return st.GCPasses.Load() }),
		counter("tidekv_gc_commands_applied_total", "MVCC GC commands (chunks) this node's replicas applied.",
			func(st *raftstore.Stats) uint64 { return st.GCCommandsApplied.Load() }),
		counter("tidekv_gc_versions_removed_total", "Versions (tombstones included) MVCC GC removed on this node.",
			func(st *raftstore.Stats) uint64 { return st.GCVersionsRemoved.Load() }),
		counter("tidekv_gc_bytes_removed_total", "Engine key and value bytes of the versions MVCC GC removed on this node.",
			func(st *raftstore.Stats) uint64 { return st.GCBytesRemoved.Load() }),
		counter("tidekv_raft_messages_misaddressed_total", "Raft messages and snapshots dropped because they were for another node ID (a node at a replaced node's address).",
			func(st *raftstore.Stats) uint64 { return st.MessagesMisaddressed.Load() }),
		counter("tidekv_stale_replicas_removed_total", "Local replicas the replica GC removed (the range directory no longer lists them here).",
			func(st *raftstore.Stats) uint64 { return st.StaleReplicasRemoved.Load() }),
		// With process_cpu_seconds_total and tidekv_raft_syncs_total, what
		// `tidekv bench` divides by operations to report cost per operation.
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_process_write_bytes_total",
			Help: "Bytes this process caused to be written to storage (/proc/self/io write_bytes)."},
			func() float64 {
				n, err := monitor.ProcessWriteBytes()
				if err != nil {
					return math.NaN()
				}
				return float64(n)
			}),
	)
}
