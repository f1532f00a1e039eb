package server

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/tap"

	"github.com/tidekv/tidekv/api/kvbatch"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// admit passes a KV request through the node's admission control. Its
// arrival, priority and gate outcome were recorded by arrive for gRPC
// requests, by the Batch stream as it read them, and for Redis commands
// by redisLocal (their arrival is when their connection read them; they
// pass the gate here).
//
// Reads, Redis reads included, are measured but never shed by delay, only
// bounded by the in-flight cap: a refusal costs a node as much as serving
// a cached read (25 µs of CPU each over gRPC), so refusing reads frees
// nothing and only loses them; shedding them on sized nodes cut read
// goodput at 1.5× from 150% to 55% (docs/admission.md). Writes are shed:
// a refused write saves its Raft round, its fsyncs and its replication.
// On nil the caller must call s.adm.Done with the returned priority when
// the request ends.
func (s *Server) admit(ctx context.Context, read bool) (admission.Priority, error) {
	if !s.ports.ready.Load() {
		return 0, s.toStatus(raftstore.ErrStopped)
	}
	at, p, gated := admission.ArrivalOf(ctx)
	if read {
		if !at.IsZero() {
			s.adm.Observe(at)
		}
		at, gated = time.Time{}, true
	}
	if err := s.adm.Admit(p, at, gated); err != nil {
		return 0, refused(err)
	}
	return p, nil
}

// arrive is the gRPC server's first look at a request: its header has been
// read, its payload not yet. KV requests are stamped with their arrival;
// writes pass the admission gate here, so that a node that is shedding
// refuses them before it spends anything on them. Other services (Raft,
// admin) are never refused here.
func (s *Server) arrive(ctx context.Context, info *tap.Info) (context.Context, error) {
	if err := s.startingErr(info.FullMethodName); err != nil {
		return ctx, err
	}
	if !strings.HasPrefix(info.FullMethodName, "/tidekv.KV/") || info.FullMethodName == tidekvpb.KV_Batch_FullMethodName {
		// A Batch stream's requests are stamped and gated one by one as
		// its messages are read (Batch).
		return ctx, nil
	}
	p := admission.Normal
	if v := info.Header.Get(client.PriorityHeader); len(v) > 0 {
		p = admissionPriority(tidekvpb.Priority(tidekvpb.Priority_value[v[0]]))
	}
	if !readMethods[info.FullMethodName] {
		if err := s.adm.Gate(p); err != nil {
			return ctx, refused(err)
		}
	}
	return admission.WithArrival(ctx, time.Now(), p, true), nil
}

// admissionPriority is how admission treats a request's API priority.
func admissionPriority(p tidekvpb.Priority) admission.Priority {
	switch p {
	case tidekvpb.Priority_PRIORITY_BACKGROUND:
		return admission.Background
	case tidekvpb.Priority_PRIORITY_HIGH:
		return admission.High
	}
	return admission.Normal
}

// readMethods are the KV methods that only read.
var readMethods = map[string]bool{
	tidekvpb.KV_Get_FullMethodName: true, tidekvpb.KV_Scan_FullMethodName: true, tidekvpb.KV_BatchGet_FullMethodName: true,
}

// refused renders an admission refusal as OVERLOADED with its retry hint.
func refused(err error) error {
	var r *admission.Rejection
	if !errors.As(err, &r) {
		return err
	}
	return withDetail(codes.ResourceExhausted, r.Error(), refusalDetail(r))
}

func refusalDetail(r *admission.Rejection) *tidekvpb.ErrorDetail {
	return &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED,
		RetryAfterMs: uint32(max(r.RetryAfter.Milliseconds(), 1)), AdmitShare: r.Share}
}

// refusedAnswer is an admission refusal as a Batch stream's answer, built
// directly: a refusal on the stream must cost far less than a service.
func refusedAnswer(id uint64, err error) *tidekvpb.KVResponse {
	var r *admission.Rejection
	if !errors.As(err, &r) {
		return kvbatch.ErrResponse(id, err)
	}
	return &tidekvpb.KVResponse{Id: id, ErrorCode: uint32(codes.ResourceExhausted), ErrorMessage: r.Error(), ErrorDetail: refusalDetail(r)}
}

// admissionCollectors are the admission metrics read from the controller.
func (s *Server) admissionCollectors() []prometheus.Collector {
	gauge := func(name, help string, fn func(admission.State) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return fn(s.adm.State()) })
	}
	out := []prometheus.Collector{
		gauge("tidekv_requests_inflight", "KV requests in progress (bounded by the admission's MaxInflight).",
			func(st admission.State) float64 { return float64(st.Inflight) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tidekv_requests_inflight_limit", Help: "The bound on KV requests in progress."},
			func() float64 { return float64(s.cfg.Admission.MaxInflight) }),
		gauge("tidekv_admission_admit_share", "Share of new normal-priority requests the admission gate admits (1 = all; below 1 the node sheds).",
			func(st admission.State) float64 { return st.AdmitShare }),
		gauge("tidekv_admission_overloaded", "1 while the median queueing delay of a window (or the scheduler's run-queue latency) stays above the target.",
			func(st admission.State) float64 { return b2f(st.Overloaded) }),
		gauge("tidekv_admission_window_delay_seconds", "Median queueing delay of the last admission window.",
			func(st admission.State) float64 { return max(st.QueueDelay, 0).Seconds() }),
		gauge("tidekv_scheduler_latency_seconds", "Median time runnable goroutines waited for a CPU over the last admission window.",
			func(st admission.State) float64 { return st.SchedLatency.Seconds() }),
	}
	for _, r := range admission.Reasons() {
		out = append(out, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tidekv_requests_rejected_total",
			Help:        "KV requests refused as overloaded, by reason (inflight, shed, queue-delay, background).",
			ConstLabels: prometheus.Labels{"reason": r.String()}}, func() float64 { return float64(s.adm.State().Rejected[r]) }))
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ms is d in milliseconds, for reports.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startingErr refuses every call but peers' Raft traffic until the node is
// ready: gRPC serves from before the node joins (Raft traffic may come
// first), but its store does not exist until it has joined, and every
// other service reaches it (a transaction's Get on a restarted node
// dereferenced the missing store and killed the process). A client that
// knew the address (a node replaced on a wiped disk, or restarted) tries
// another node; the refusal says the request did nothing.
func (s *Server) startingErr(method string) error {
	if s.ports.ready.Load() || strings.HasPrefix(method, "/tidekv.Raft/") {
		return nil
	}
	return withDetail(codes.Unavailable, "node is starting: it serves requests once it has joined the cluster, retry another node",
		&tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_UNAVAILABLE})
}
