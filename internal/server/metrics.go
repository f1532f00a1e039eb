package server

import (
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/status"
)

// metrics are the node's Prometheus series, on its own registry so several
// in-process nodes (tests) never collide.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	rejected prometheus.Counter

	rate struct {
		sync.Mutex
		last  time.Time
		count float64
		qps   float64
	}
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tidekv_requests_total", Help: "KV requests by operation and gRPC status code.",
	}, []string{"op", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tidekv_request_duration_seconds", Help: "KV request latency on the serving node.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"op"})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tidekv_requests_rejected_total", Help: "Requests refused because the node was overloaded.",
	})
	m.reg.MustRegister(m.requests, m.latency, m.rejected, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(op string, start time.Time, err error) {
	m.requests.WithLabelValues(op, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// qps returns the request rate since the previous call.
func (m *metrics) qps() float64 {
	m.rate.Lock()
	defer m.rate.Unlock()
	var total float64
	mfs, _ := m.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "tidekv_requests_total" {
			for _, mm := range mf.GetMetric() {
				total += mm.GetCounter().GetValue()
			}
		}
	}
	now := time.Now()
	if !m.rate.last.IsZero() {
		if dt := now.Sub(m.rate.last).Seconds(); dt > 0.2 {
			m.rate.qps = (total - m.rate.count) / dt
			m.rate.last, m.rate.count = now, total
		}
	} else {
		m.rate.last, m.rate.count = now, total
	}
	return m.rate.qps
}

// registerStoreGauges exports the node's replica state, computed at scrape
// time so the request path pays nothing.
func (s *Server) registerStoreGauges() {
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidekv_replicas", Help: "Replicas on this node."}, count(false)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidekv_leases", Help: "Ranges whose lease this node holds."}, count(true)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidekv_requests_inflight", Help: "KV requests in progress (bounded by MaxInflightRequests)."},
			func() float64 { return float64(len(s.inflight)) }),
	)
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	// Profiling, for finding where time goes (see docs/benchmarks.md).
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	return mux
}
