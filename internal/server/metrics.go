package server

import (
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/httpapi"
	"github.com/tidekv/tidekv/internal/monitor"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// metrics are the node's Prometheus series, on its own registry so several
// in-process nodes (tests) never collide.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// queueDelay is the admission queueing delay of every measured request.
	queueDelay prometheus.Histogram
	// Batch streams: messages read and the requests they carried (their
	// ratio is how many requests share a message).
	streamMessages, streamRequests prometheus.Counter

	redisCommands *prometheus.CounterVec
	redisLatency  *prometheus.HistogramVec

	rangeQPS  *prometheus.GaugeVec
	imbalance *prometheus.GaugeVec
	// splitWaits counts writes held for a split, by outcome (sizewatch.go).
	splitWaits *prometheus.CounterVec
	// Per key space, labelled by its number (keyspaces.go): requests this
	// node served, and (meta leaseholder) the bytes and ranges it holds.
	keyspaceRequests              *prometheus.CounterVec
	keyspaceBytes, keyspaceRanges *prometheus.GaugeVec
	// keyspacePrelaunch and keyspaceFullest: the overflow policy's
	// threshold and fullest node's bytes, by grow-when-full key space.
	keyspacePrelaunch, keyspaceFullest *prometheus.GaugeVec
	// Evictions this node's leaseholders made, and point reads it served
	// that found their key or not, by key space (kscounters.go).
	keyspaceEvictions, keyspaceHits, keyspaceMisses *prometheus.CounterVec
	// Live keys of each key space's ranges (meta leaseholder).
	keyspaceKeys *prometheus.GaugeVec
	// txnCommits counts the transactions this node coordinated that
	// committed with writes, by how (txncommit.go).
	txnCommits *prometheus.CounterVec
	// txnRefreshes counts two-phase commits that refreshed their reads
	// (their writes were pushed above their read timestamp).
	txnRefreshes prometheus.Counter
	// loginFailures counts refused password logins (gRPC and Redis), by
	// whether the password was wrong or the login came during a back-off.
	loginFailures *prometheus.CounterVec
	// txnUncertainRestarts counts reads that found a version in their
	// transaction's uncertainty window and raised its read timestamp.
	txnUncertainRestarts prometheus.Counter

	series series

	// kvOps holds each KV operation's *kvOpMetrics.
	kvOps sync.Map
}

// latencyBuckets span 100µs to about 3.3s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2, 16)

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_requests_total", Help: "KV requests (gRPC API) by operation and gRPC status code.",
	}, []string{"op", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tidekv_request_duration_seconds", Help: "KV request (gRPC API) latency on the serving node.",
		Buckets: latencyBuckets,
	}, []string{"op"})
	m.queueDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tidekv_admission_queue_delay_seconds", Help: "How long KV requests waited between arriving at the node and the start of their work (gRPC requests; docs/admission.md).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
	})
	m.streamMessages = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidekv_kv_stream_messages_total", Help: "Messages read from KV Batch streams.",
	})
	m.streamRequests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidekv_kv_stream_requests_total", Help: "KV requests read from Batch streams (divided by tidekv_kv_stream_messages_total: requests per message).",
	})
	m.redisCommands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_redis_commands_total", Help: "Redis-protocol commands by command and result (ok or error).",
	}, []string{"command", "result"})
	m.redisLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tidekv_redis_command_duration_seconds", Help: "Redis-protocol command latency on the node serving the connection.",
		Buckets: latencyBuckets,
	}, []string{"command"})
	m.rangeQPS = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_range_qps", Help: "Requests per second of the busiest ranges this node leads (top 10).",
	}, []string{"range_id"})
	m.imbalance = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_imbalance", Help: "Standard deviation over mean across live nodes (exported by the meta leaseholder).",
	}, []string{"dimension"})
	m.keyspaceRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_keyspace_requests_total", Help: "KV requests this node served by key space number (0: the default) and operation.",
	}, []string{"keyspace", "op"})
	m.keyspaceBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_bytes", Help: "Live bytes of each key space's ranges as their leaseholders last reported them (exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.keyspacePrelaunch = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_prelaunch_threshold_bytes", Help: "Bytes of a grow-when-full key space at which a node asks for one more node (T; exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.keyspaceFullest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_fullest_node_bytes", Help: "Bytes of a grow-when-full key space its fullest node holds (exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.keyspaceEvictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_keyspace_evictions_total", Help: "Keys of each key space this node's leaseholders evicted because the node held more than the key space's capacity.",
	}, []string{"keyspace"})
	m.keyspaceHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_keyspace_hits_total", Help: "Point reads (get, batch get: per key) this node served that found their key, by key space.",
	}, []string{"keyspace"})
	m.keyspaceMisses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_keyspace_misses_total", Help: "Point reads (get, batch get: per key) this node served that did not find their key, by key space.",
	}, []string{"keyspace"})
	m.keyspaceKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_keys", Help: "Live keys of each key space's ranges as their leaseholders last counted them (exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.keyspaceRanges = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_ranges", Help: "Ranges of each key space (exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.splitWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_split_backpressure_total", Help: "Writes held because their range was above its size limit and waiting for its split, by outcome (split: went ahead after it; refused: overloaded after the longest wait).",
	}, []string{"outcome"})
	m.txnCommits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_txn_commits_total", Help: "Transactions with writes this node coordinated that committed, by path: one_phase (all keys in one range: one Raft command) or two_phase (intents, record).",
	}, []string{"path"})
	m.txnRefreshes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidekv_txn_refreshes_total", Help: "Two-phase commits this node coordinated whose writes were pushed above their read timestamp (by another's read, or a closed timestamp), so that their reads were checked again up to the commit timestamp.",
	})
	m.loginFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_login_failures_total", Help: "Refused password logins (gRPC and Redis): result wrong (a wrong user name or password) or backoff (refused unchecked: too many failures of the user or from the address).",
	}, []string{"result"})
	m.txnUncertainRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidekv_txn_uncertain_reads_total", Help: "Reads of transactions this node coordinated that found a committed version above their read timestamp within the maximum clock offset (the uncertainty window), so that the read timestamp was raised above it and the earlier reads refreshed.",
	})
	m.reg.MustRegister(m.loginFailures, m.txnCommits, m.txnRefreshes, m.txnUncertainRestarts, m.requests, m.latency, m.queueDelay, m.streamMessages, m.streamRequests, m.redisCommands, m.redisLatency, m.rangeQPS, m.imbalance, m.splitWaits,
		m.keyspaceRequests, m.keyspaceBytes, m.keyspaceRanges, m.keyspacePrelaunch, m.keyspaceFullest, m.keyspaceEvictions, m.keyspaceHits, m.keyspaceMisses, m.keyspaceKeys, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// observe counts one KV request of op that began at start and ended with
// err (a typed error or a status: errCode).
func (m *metrics) observe(op string, start time.Time, err error) {
	om := m.kvOp(op)
	om.requests(errCode(err)).Inc()
	om.latency.Observe(time.Since(start).Seconds())
}

// kvOpMetrics are one KV operation's metric children, resolved once rather
// than looked up by label values on every request.
type kvOpMetrics struct {
	m        *metrics
	op       string
	latency  prometheus.Observer
	byCode   [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Counter]
	defaultK prometheus.Counter // requests of the default key space
}

// kvOp is op's metric children.
func (m *metrics) kvOp(op string) *kvOpMetrics {
	if om, ok := m.kvOps.Load(op); ok {
		return om.(*kvOpMetrics)
	}
	om, _ := m.kvOps.LoadOrStore(op, &kvOpMetrics{m: m, op: op, latency: m.latency.WithLabelValues(op),
		defaultK: m.keyspaceRequests.WithLabelValues(idLabel(keyspace.Default), op)})
	return om.(*kvOpMetrics)
}

// requests is the request counter of code, made at its first use so that
// only the codes seen are exported.
func (om *kvOpMetrics) requests(code codes.Code) prometheus.Counter {
	if int(code) >= len(om.byCode) {
		return om.m.requests.WithLabelValues(om.op, code.String())
	}
	if c := om.byCode[code].Load(); c != nil {
		return *c
	}
	c := om.m.requests.WithLabelValues(om.op, code.String())
	om.byCode[code].Store(&c)
	return c
}

// keySpace is the counter of requests of key's key space.
func (om *kvOpMetrics) keySpace(key []byte) prometheus.Counter {
	if id := keyspace.Of(key); id != keyspace.Default {
		return om.m.keyspaceRequests.WithLabelValues(idLabel(id), om.op)
	}
	return om.defaultK
}

func (m *metrics) observeRedis(command string, took time.Duration, failed bool) {
	result := "ok"
	if failed {
		result = "error"
	}
	m.redisCommands.WithLabelValues(command, result).Inc()
	m.redisLatency.WithLabelValues(command).Observe(took.Seconds())
}

// setTopRanges exports the busiest ranges' rates, replacing the last set.
func (m *metrics) setTopRanges(load map[uint64]rangeLoad, leader func(uint64) bool) {
	type rq struct {
		id  uint64
		qps float64
	}
	var top []rq
	for id, l := range load {
		if leader(id) {
			top = append(top, rq{id, l.qps})
		}
	}
	sort.Slice(top, func(i, j int) bool { return top[i].qps > top[j].qps })
	m.rangeQPS.Reset()
	for i := 0; i < len(top) && i < 10; i++ {
		m.rangeQPS.WithLabelValues(strconv.FormatUint(top[i].id, 10)).Set(top[i].qps)
	}
}

func (m *metrics) setImbalance(im *tidekvpb.Imbalance) {
	m.imbalance.WithLabelValues("replicas").Set(im.GetReplicas())
	m.imbalance.WithLabelValues("bytes").Set(im.GetBytes())
	m.imbalance.WithLabelValues("qps").Set(im.GetQps())
	m.imbalance.WithLabelValues("cpu").Set(im.GetCpu())
}

// seriesLen points at one per second keep ten minutes of history.
const (
	seriesLen      = 600
	seriesInterval = time.Second
)

// seriesPoint is the node's request rate and p99 latency over one
// interval, as the HTTP port serves it.
type seriesPoint = httpapi.SeriesPoint

// series samples the KV latency histogram once per interval into a ring of
// points (rate and p99 of the interval).
type series struct {
	mu          sync.Mutex
	points      []seriesPoint
	prevAt      time.Time
	prevCount   uint64
	prevBuckets []uint64
}

// sample takes one point from the registry's KV latency histogram.
func (m *metrics) sample(now time.Time) {
	count, buckets, bounds := m.latencyTotals()
	s := &m.series
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.prevAt.IsZero() && len(s.prevBuckets) == len(buckets) {
		dt := now.Sub(s.prevAt).Seconds()
		delta := make([]uint64, len(buckets))
		for i := range buckets {
			delta[i] = buckets[i] - s.prevBuckets[i]
		}
		p := seriesPoint{T: now.UnixMilli(), P99Ms: 1000 * quantile(0.99, count-s.prevCount, delta, bounds)}
		if dt > 0 {
			p.QPS = float64(count-s.prevCount) / dt
		}
		if len(s.points) == seriesLen {
			copy(s.points, s.points[1:])
			s.points = s.points[:seriesLen-1]
		}
		s.points = append(s.points, p)
	}
	s.prevAt, s.prevCount, s.prevBuckets = now, count, buckets
}

// latencyTotals sums the KV latency histogram over operations: the count and
// cumulative bucket counts with their upper bounds.
func (m *metrics) latencyTotals() (count uint64, buckets []uint64, bounds []float64) {
	mfs, _ := m.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "tidekv_request_duration_seconds" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			h := mm.GetHistogram()
			count += h.GetSampleCount()
			if buckets == nil {
				buckets = make([]uint64, len(h.GetBucket()))
				for _, b := range h.GetBucket() {
					bounds = append(bounds, b.GetUpperBound())
				}
			}
			for i, b := range h.GetBucket() {
				if i < len(buckets) {
					buckets[i] += b.GetCumulativeCount()
				}
			}
		}
	}
	if buckets == nil {
		buckets, bounds = make([]uint64, len(latencyBuckets)), latencyBuckets
	}
	return count, buckets, bounds
}

// quantile estimates the q-quantile in seconds from cumulative bucket counts,
// interpolating linearly inside the bucket (as Prometheus'
// histogram_quantile does); observations past the last bound count as it.
func quantile(q float64, total uint64, cumulative []uint64, bounds []float64) float64 {
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for i, c := range cumulative {
		if float64(c) >= rank {
			inBucket := c - below
			if inBucket == 0 {
				return bounds[i]
			}
			return lower + (bounds[i]-lower)*(rank-float64(below))/float64(inBucket)
		}
		lower, below = bounds[i], c
	}
	return bounds[len(bounds)-1]
}

// latest returns the most recent point (zero before two samples).
func (m *metrics) latest() seriesPoint {
	s := &m.series
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.points) == 0 {
		return seriesPoint{}
	}
	return s.points[len(s.points)-1]
}

// points returns a copy of the kept points, oldest first.
func (m *metrics) points() []seriesPoint {
	s := &m.series
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seriesPoint(nil), s.points...)
}

// registerStoreGauges exports the node's replica state, its resource use
// and the store's counters, computed at scrape time so the request path
// pays nothing.
func (s *Server) registerStoreGauges() {
	s.registerReplicaGauges()
	s.registerUsageGauges()
	s.registerStoreCounters()
}

func gaugeFunc(name, help string, fn func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
}

// registerReplicaGauges exports replica and lease counts, the migration
// allowance and the autoscaler's target.
func (s *Server) registerReplicaGauges() {
	count := func(leaders bool) func() float64 {
		return func() float64 {
			if s.store == nil {
				return 0
			}
			n := 0
			for _, r := range s.store.Replicas() {
				if !leaders || r.IsLeader() {
					n++
				}
			}
			return float64(n)
		}
	}
	s.metrics.reg.MustRegister(
		gaugeFunc("tidekv_replicas", "Replicas on this node.", count(false)),
		gaugeFunc("tidekv_leases", "Ranges whose lease this node holds.", count(true)),
		gaugeFunc("tidekv_migration_allowance_bytes_per_second", "The snapshot bandwidth this node may use now, as the bandwidth controller set it.",
			func() float64 {
				if s.store == nil {
					return 0
				}
				return s.store.SnapshotRate()
			}),
		gaugeFunc("tidekv_memory_keyspaces", "Key spaces this node keeps in memory engines (it routes a memory key space once it learns of it).",
			func() float64 { return float64(s.mem.count()) }),
		gaugeFunc("tidekv_autoscale_target_nodes", "The node count the elasticity controller wants (exported by the meta leaseholder; 0 elsewhere).",
			func() float64 {
				if s.metaLeader() == nil {
					return 0
				}
				return float64(s.ctl.loop.Autoscaler.Status().TargetNodes)
			}),
	)
}

// registerUsageGauges exports the resource monitor's latest sample.
func (s *Server) registerUsageGauges() {
	usage := func(fn func(*monitor.Snapshot) float64) func() float64 {
		return func() float64 {
			if snap := s.mon.Latest(); snap != nil {
				return fn(snap)
			}
			return 0
		}
	}
	s.metrics.reg.MustRegister(
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
func (s *Server) registerStoreCounters() {
	counter := func(name, help string, v func(*raftstore.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			if s.store == nil {
				return 0
			}
			return float64(v(s.store.Stats()))
		})
	}
	s.metrics.reg.MustRegister(
		counter("tidekv_raft_rounds_total", "Raft scheduler rounds that handled at least one Ready.",
			func(st *raftstore.Stats) uint64 { return st.Rounds.Load() }),
		counter("tidekv_raft_syncs_total", "Synced Raft state batches (group commits).",
			func(st *raftstore.Stats) uint64 { return st.Syncs.Load() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_raft_sync_seconds_total", Help: "Time spent in synced Raft state batches."},
			func() float64 {
				if s.store == nil {
					return 0
				}
				return time.Duration(s.store.Stats().SyncNanos.Load()).Seconds()
			}),
		counter("tidekv_raft_entries_appended_total", "Raft log entries written.",
			func(st *raftstore.Stats) uint64 { return st.EntriesAppended.Load() }),
		counter("tidekv_raft_entries_committed_total", "Committed Raft entries applied to the state machine.",
			func(st *raftstore.Stats) uint64 { return st.EntriesCommitted.Load() }),
		counter("tidekv_raft_messages_sent_total", "Raft messages handed to the transport.",
			func(st *raftstore.Stats) uint64 { return st.MessagesSent.Load() }),
		counter("tidekv_raft_messages_dropped_total", "Raft messages the transport refused (peer unknown or queue full).",
			func(st *raftstore.Stats) uint64 { return st.MessagesDropped.Load() }),
		counter("tidekv_snapshots_sent_total", "Range snapshots sent.",
			func(st *raftstore.Stats) uint64 { return st.SnapshotsSent.Load() }),
		counter("tidekv_snapshot_sent_bytes_total", "Snapshot SST bytes sent.",
			func(st *raftstore.Stats) uint64 { return st.SnapshotBytesSent.Load() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_snapshot_throttled_seconds_total", Help: "Time snapshot sends waited for the migration bandwidth cap."},
			func() float64 {
				if s.store == nil {
					return 0
				}
				return time.Duration(s.store.Stats().SnapshotThrottleNanos.Load()).Seconds()
			}),
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
