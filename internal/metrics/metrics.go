package metrics

import (
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
)

// Set is a node's Prometheus series, on its own registry so several
// in-process nodes (tests) never collide. The exported series are the ones
// other packages count into directly.
type Set struct {
	Reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// queueDelay is the admission queueing delay of every measured request.
	queueDelay prometheus.Histogram
	// Batch streams: messages read and the requests they carried (their
	// ratio is how many requests share a message).
	StreamMessages, StreamRequests prometheus.Counter

	redisCommands *prometheus.CounterVec
	redisLatency  *prometheus.HistogramVec

	rangeQPS  *prometheus.GaugeVec
	imbalance *prometheus.GaugeVec
	// splitWaits counts writes held for a split, by outcome (internal/sizewatch).
	SplitWaits *prometheus.CounterVec
	// Per key space, labelled by its number (keyspaces.go): requests this
	// node served, and (meta leaseholder) the bytes and ranges it holds.
	keyspaceRequests              *prometheus.CounterVec
	KeyspaceBytes, KeyspaceRanges *prometheus.GaugeVec
	// keyspacePrelaunch and keyspaceFullest: the overflow policy's
	// threshold and fullest node's bytes, by grow-when-full key space.
	KeyspacePrelaunch, KeyspaceFullest *prometheus.GaugeVec
	// Evictions this node's leaseholders made, and point reads it served
	// that found their key or not, by key space (internal/keyspaces/counters.go).
	KeyspaceEvictions, KeyspaceHits, KeyspaceMisses *prometheus.CounterVec
	// Live keys of each key space's ranges (meta leaseholder).
	KeyspaceKeys *prometheus.GaugeVec
	// txnCommits counts the transactions this node coordinated that
	// committed with writes, by how (txncommit.go).
	TxnCommits *prometheus.CounterVec
	// txnRefreshes counts two-phase commits that refreshed their reads
	// (their writes were pushed above their read timestamp).
	TxnRefreshes prometheus.Counter
	// TxnRecordsLeft counts final transaction records this node's
	// coordinator did not remove, by why (internal/txn).
	TxnRecordsLeft *prometheus.CounterVec
	// loginFailures counts refused password logins (gRPC and Redis), by
	// whether the password was wrong or the login came during a back-off.
	LoginFailures *prometheus.CounterVec
	// txnUncertainRestarts counts reads that found a version in their
	// transaction's uncertainty window and raised its read timestamp.
	TxnUncertainRestarts prometheus.Counter

	series series
	// latencyOnly gathers the latency histogram alone: Sample reads it
	// every second, and gathering all of Reg (the Go and process
	// collectors read /proc) cost an idle node ~1.3 ms of CPU a second.
	latencyOnly *prometheus.Registry

	// kvOps holds each KV operation's *KVOpMetrics.
	kvOps sync.Map
}

// latencyBuckets span 100µs to about 3.3s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2, 16)

func New() *Set {
	m := &Set{Reg: prometheus.NewRegistry()}
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
	m.StreamMessages = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidekv_kv_stream_messages_total", Help: "Messages read from KV Batch streams.",
	})
	m.StreamRequests = prometheus.NewCounter(prometheus.CounterOpts{
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
	m.KeyspaceBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_bytes", Help: "Live bytes of each key space's ranges as their leaseholders last reported them (exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.KeyspacePrelaunch = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_prelaunch_threshold_bytes", Help: "Bytes of a grow-when-full key space at which a node asks for one more node (T; exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.KeyspaceFullest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_fullest_node_bytes", Help: "Bytes of a grow-when-full key space its fullest node holds (exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.KeyspaceEvictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_keyspace_evictions_total", Help: "Keys of each key space this node's leaseholders evicted because the node held more than the key space's capacity.",
	}, []string{"keyspace"})
	m.KeyspaceHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_keyspace_hits_total", Help: "Point reads (get, batch get: per key) this node served that found their key, by key space.",
	}, []string{"keyspace"})
	m.KeyspaceMisses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_keyspace_misses_total", Help: "Point reads (get, batch get: per key) this node served that did not find their key, by key space.",
	}, []string{"keyspace"})
	m.KeyspaceKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_keys", Help: "Live keys of each key space's ranges as their leaseholders last counted them (exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.KeyspaceRanges = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tidekv_keyspace_ranges", Help: "Ranges of each key space (exported by the meta leaseholder).",
	}, []string{"keyspace"})
	m.SplitWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_split_backpressure_total", Help: "Writes held because their range was above its size limit and waiting for its split, by outcome (split: went ahead after it; refused: overloaded after the longest wait).",
	}, []string{"outcome"})
	m.TxnCommits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_txn_commits_total", Help: "Transactions with writes this node coordinated that committed, by path: one_phase (all keys in one range: one Raft command) or two_phase (intents, record).",
	}, []string{"path"})
	m.TxnRefreshes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidekv_txn_refreshes_total", Help: "Two-phase commits this node coordinated whose writes were pushed above their read timestamp (by another's read, or a closed timestamp), so that their reads were checked again up to the commit timestamp.",
	})
	m.TxnRecordsLeft = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_txn_records_left_total", Help: "Transaction records this node's coordinator chose not to remove, or failed to, a few bytes each, by why: creation_unsure (an aborted transaction whose record-creating heartbeat got no answer: removing the record would let that heartbeat make it again, pending, for good) or forget_failed (the removal failed or its answer was lost). Records left when an abort or a resolution fails are not counted: whoever meets their intents ends them.",
	}, []string{"why"})
	m.LoginFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_login_failures_total", Help: "Refused password logins (gRPC, Redis and HTTP): result wrong (a wrong user name or password), backoff (refused unchecked: too many failures of the user or from the address) or busy (refused unchecked: the node's derivation budget for logins not yet verified was spent).",
	}, []string{"result"})
	m.TxnUncertainRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidekv_txn_uncertain_reads_total", Help: "Reads of transactions this node coordinated that found a committed version above their read timestamp within the maximum clock offset (the uncertainty window), so that the read timestamp was raised above it and the earlier reads refreshed.",
	})
	m.Reg.MustRegister(m.LoginFailures, m.TxnCommits, m.TxnRefreshes, m.TxnRecordsLeft, m.TxnUncertainRestarts, m.requests, m.latency, m.queueDelay, m.StreamMessages, m.StreamRequests, m.redisCommands, m.redisLatency, m.rangeQPS, m.imbalance, m.SplitWaits,
		m.keyspaceRequests, m.KeyspaceBytes, m.KeyspaceRanges, m.KeyspacePrelaunch, m.KeyspaceFullest, m.KeyspaceEvictions, m.KeyspaceHits, m.KeyspaceMisses, m.KeyspaceKeys, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.latencyOnly = prometheus.NewRegistry()
	m.latencyOnly.MustRegister(m.latency)
	return m
}

// Observe counts one KV request of op that began at start and ended with
// code.
func (m *Set) Observe(op string, start time.Time, code codes.Code) {
	om := m.KVOp(op)
	om.Requests(code).Inc()
	om.Latency.Observe(time.Since(start).Seconds())
}

// KVOpMetrics are one KV operation's metric children, resolved once rather
// than looked up by label values on every request.
type KVOpMetrics struct {
	m        *Set
	op       string
	Latency  prometheus.Observer
	byCode   [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Counter]
	defaultK prometheus.Counter // requests of the default key space
}

// KVOp is op's metric children.
func (m *Set) KVOp(op string) *KVOpMetrics {
	if om, ok := m.kvOps.Load(op); ok {
		return om.(*KVOpMetrics)
	}
	om, _ := m.kvOps.LoadOrStore(op, &KVOpMetrics{m: m, op: op, Latency: m.latency.WithLabelValues(op),
		defaultK: m.keyspaceRequests.WithLabelValues(IDLabel(keyspace.Default), op)})
	return om.(*KVOpMetrics)
}

// Requests is the request counter of code, made at its first use so that
// only the codes seen are exported.
func (om *KVOpMetrics) Requests(code codes.Code) prometheus.Counter {
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

// KeySpace is the counter of requests of key's key space.
func (om *KVOpMetrics) KeySpace(key []byte) prometheus.Counter {
	if id := keyspace.Of(key); id != keyspace.Default {
		return om.m.keyspaceRequests.WithLabelValues(IDLabel(id), om.op)
	}
	return om.defaultK
}

// ObserveRedis counts one Redis command and its latency.
func (m *Set) ObserveRedis(command string, took time.Duration, failed bool) {
	result := "ok"
	if failed {
		result = "error"
	}
	m.redisCommands.WithLabelValues(command, result).Inc()
	m.redisLatency.WithLabelValues(command).Observe(took.Seconds())
}

// SetTopRanges exports the busiest led ranges' rates (requests per second
// by range ID), replacing the last set.
func (m *Set) SetTopRanges(qps map[uint64]float64) {
	type rq struct {
		id  uint64
		qps float64
	}
	var top []rq
	for id, q := range qps {
		top = append(top, rq{id, q})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].qps > top[j].qps })
	m.rangeQPS.Reset()
	for i := 0; i < len(top) && i < 10; i++ {
		m.rangeQPS.WithLabelValues(strconv.FormatUint(top[i].id, 10)).Set(top[i].qps)
	}
}

// SetImbalance exports the cluster's imbalance as the meta leaseholder computed it.
func (m *Set) SetImbalance(im *tidekvpb.Imbalance) {
	m.imbalance.WithLabelValues("replicas").Set(im.GetReplicas())
	m.imbalance.WithLabelValues("bytes").Set(im.GetBytes())
	m.imbalance.WithLabelValues("qps").Set(im.GetQps())
	m.imbalance.WithLabelValues("cpu").Set(im.GetCpu())
}

// seriesLen points at one per second keep ten minutes of history.
const (
	seriesLen = 600
	// SeriesInterval is how often the node samples the series (Sample).
	SeriesInterval = time.Second
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

// Sample takes one point from the registry's KV latency histogram.
func (m *Set) Sample(now time.Time) {
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
func (m *Set) latencyTotals() (count uint64, buckets []uint64, bounds []float64) {
	mfs, _ := m.latencyOnly.Gather()
	for _, mf := range mfs {
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

// Latest returns the most recent point (zero before two samples).
func (m *Set) Latest() seriesPoint {
	s := &m.series
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.points) == 0 {
		return seriesPoint{}
	}
	return s.points[len(s.points)-1]
}

// Points returns a copy of the kept points, oldest first.
func (m *Set) Points() []seriesPoint {
	s := &m.series
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seriesPoint(nil), s.points...)
}

// IDLabel is the metrics label of key space id: its number.
func IDLabel(id keyspace.ID) string { return strconv.FormatUint(uint64(id), 10) }

// ObserveQueueDelay records one measured request's queueing delay.
func (m *Set) ObserveQueueDelay(d time.Duration) { m.queueDelay.Observe(d.Seconds()) }
