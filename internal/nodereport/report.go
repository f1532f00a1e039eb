package nodereport

import (
	"context"
	"log"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/clockwatch"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/monitor"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/rangeload"
	"github.com/tidekv/tidekv/internal/sizewatch"
)

// OriginMetadataKey is the gRPC metadata key under which clients name the
// locality their writes come from ("region=eu,zone=a"). Leaseholders count
// writes by it and report the rates with each range's load; the control
// loop moves leases toward the writers (placement's follow-writers
// policy).
const OriginMetadataKey = "tidekv-origin"

// Node is the node as its reports see it.
type Node interface {
	// Self is this node's descriptor; ID its node ID.
	Self() *tidekvpb.NodeDescriptor
	ID() uint64
	// Replicas are the local replicas; Replica the one of range id, nil
	// if none.
	Replicas() []*raftstore.Replica
	Replica(id uint64) *raftstore.Replica
	// Bytes is what the local replicas store.
	Bytes() uint64
	// ClockUntrusted says the store takes no leases: its clock is not
	// trusted.
	ClockUntrusted() bool
	// Heartbeat and ReportRange run on the meta range's leaseholder, here
	// or forwarded.
	Heartbeat(ctx context.Context, req *tidekvpb.NodeHeartbeatRequest) (*tidekvpb.NodeHeartbeatResponse, error)
	ReportRange(ctx context.Context, req *tidekvpb.ReportRangeRequest) (*tidekvpb.ReportRangeResponse, error)
	// Heard takes in the meta range's answer to a heartbeat; its error
	// says the cluster runs at a log version this binary cannot apply.
	Heard(resp *tidekvpb.NodeHeartbeatResponse) error
	// Record adds an event to the node's log.
	Record(kind, subject, format string, args ...any)
	// Garbage is the bytes of old versions range id holds (its GC queue's
	// estimate).
	Garbage(id uint64) uint64
}

// Handles are the node's parts the reports read.
type Handles struct {
	Metrics   *metrics.Set
	Admission *admission.Controller
	// MaxInflight is the admission limit the queue's use is a share of.
	MaxInflight int
	Monitor     *monitor.Monitor
	Clock       *clockwatch.Watch
	Sizes       *sizewatch.Watch
	// KeySpaceCounts are the key spaces' counters for the heartbeat.
	KeySpaceCounts func() []*tidekvpb.KeySpaceCounts
}

// Reporter sends the node's heartbeats and range reports and keeps the
// load table they carry.
type Reporter struct {
	node Node
	h    Handles

	load rangeload.Tracker
	// origins counts writes per range by origin locality.
	origins sync.Map // range ID -> *originCounts
	// svc averages how long KV requests take, for the load score.
	svc monitor.ServiceTimer
	// rates turns the count of refused requests into the rate each
	// heartbeat reports (only the heartbeat loop uses it).
	rates heartbeatRates
	// versionWarned: a heartbeat's answer was refused for its log
	// version, and said so (only the heartbeat loop uses it).
	versionWarned bool
	// queue holds the ranges to report (Queue, Send).
	queue chan *tidekvpb.RangeDescriptor
}

// New reports node's load through its handles h.
func New(node Node, h Handles) *Reporter {
	return &Reporter{node: node, h: h, queue: make(chan *tidekvpb.RangeDescriptor, 1024)}
}

// Monitor is the node's monitor.
func (r *Reporter) Monitor() *monitor.Monitor { return r.h.Monitor }

// Served counts one KV request's service time.
func (r *Reporter) Served(d time.Duration) { r.svc.Observe(d) }

// ServiceTime is the mean service time since the previous call (the
// monitor's load function reads it once a sample).
func (r *Reporter) ServiceTime() time.Duration { return r.svc.Sample() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Heartbeat tells the meta range this node is alive, with its load, and
// takes in the answer.
func (r *Reporter) Heartbeat(ctx context.Context) {
	p := r.h.Metrics.Latest()
	adm := r.h.Admission.State()
	req := &tidekvpb.NodeHeartbeatRequest{Node: r.node.Self(), Qps: p.QPS, P99Ms: p.P99Ms,
		RejectedQps:  r.rates.rejectedRate(adm.RejectedTotal(), time.Now()),
		QueueUtil:    float64(adm.Inflight) / float64(r.h.MaxInflight),
		QueueDelayMs: ms(max(adm.QueueDelay, 0)), AdmitShare: adm.AdmitShare, Overloaded: adm.Overloaded}
	if snap := r.h.Monitor.Latest(); snap != nil {
		req.Cpu, req.Score, req.CpuQuota = snap.Usage.NodeCPU(), snap.Score, snap.Usage.Quota.CPUs
	}
	ch := r.h.Clock.Health()
	req.ClockUntrusted, req.ClockReason, req.MaxClockOffsetMs = !ch.Trusted, ch.Reason, clockwatch.MaxOffsetMs(ch)
	var qps, reads float64
	for _, rep := range r.node.Replicas() {
		req.Replicas++
		if rep.IsLeader() {
			req.Leases++
			if d := rep.Desc(); d != nil {
				l := r.rangeLoadOf(d, rep.LeaderTerm())
				qps, reads = qps+l.QPS, reads+l.ReadQPS
			}
		}
	}
	if qps > 0 {
		req.ReadShare = reads / qps
	}
	req.ReplicaReads = r.replicaReads()
	req.Bytes = r.node.Bytes()
	req.KeyspaceCounts = r.h.KeySpaceCounts()
	resp, err := r.node.Heartbeat(ctx, req)
	if err != nil {
		return
	}
	if err := r.node.Heard(resp); err != nil {
		r.logVersionRefused(err)
	}
}

// logVersionRefused reports, once, that the cluster runs at a log version
// this binary cannot apply: a newer binary raised it, and this node keeps
// proposing at its own (its replicas of ranges it does not lead still
// apply what others propose, which it may misapply: replace the binary).
func (r *Reporter) logVersionRefused(err error) {
	if r.versionWarned {
		return
	}
	r.versionWarned = true
	log.Printf("ERROR: %v", err)
	r.node.Record("log-version", events.NodeSubject(r.node.ID()), "%v", err)
}

// heartbeatRates turns the node's rejection counter into a rate between
// heartbeats.
type heartbeatRates struct {
	at       time.Time
	rejected uint64
}

func (h *heartbeatRates) rejectedRate(total uint64, now time.Time) float64 {
	var rate float64
	if dt := now.Sub(h.at).Seconds(); !h.at.IsZero() && dt > 0 && total >= h.rejected {
		rate = float64(total-h.rejected) / dt
	}
	h.at, h.rejected = now, total
	return rate
}

// Load is this node's load from its latest monitor sample, as the side
// transport sends it to peers.
func (r *Reporter) Load() *tidekvpb.NodeLoad {
	adm := r.h.Admission.State()
	l := &tidekvpb.NodeLoad{NodeId: r.node.ID(), QueueDepth: uint32(adm.Inflight), UnixNanos: time.Now().UnixNano(),
		QueueDelayMs: ms(max(adm.QueueDelay, 0)), AdmitShare: adm.AdmitShare, Overloaded: adm.Overloaded,
		ClockUntrusted: r.node.ClockUntrusted()}
	if snap := r.h.Monitor.Latest(); snap != nil {
		l.Cpu, l.Score = snap.Usage.NodeCPU(), snap.Score
	}
	return l
}

// Queue asks for a report of range d, unless the queue is full: the
// periodic report catches up.
func (r *Reporter) Queue(d *tidekvpb.RangeDescriptor) {
	select {
	case r.queue <- d:
	default:
	}
}

// Send reports the queued ranges until stop closes.
func (r *Reporter) Send(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case d := <-r.queue:
			r.Report(d)
		}
	}
}

// Report reports range d to the meta range now.
func (r *Reporter) Report(d *tidekvpb.RangeDescriptor) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var term uint64
	changing := false
	if rep := r.node.Replica(d.GetRangeId()); rep != nil {
		term, changing = rep.LeaderTerm(), rep.ChangeInProgress()
	}
	l := r.rangeLoadOf(d, term)
	req := &tidekvpb.ReportRangeRequest{Desc: d, LeaderNodeId: r.node.ID(), Qps: l.QPS, ReadQps: l.ReadQPS, Bytes: l.Bytes,
		HotKeyShare: l.HotKeyShare, LeaseTerm: l.Term, LoadStale: l.Stale, ChangeInProgress: changing,
		GarbageBytes: r.node.Garbage(d.GetRangeId()), Keys: l.Keys, WritesByOrigin: l.Writes}
	if _, err := r.node.ReportRange(ctx, req); err != nil {
		log.Printf("range %d: report to meta range: %v", d.GetRangeId(), err)
	}
}

// ReportAll samples the load table and re-reports every range this node
// leads, so the directory heals from lost reports and a new meta
// leaseholder learns the leaders.
func (r *Reporter) ReportAll(ctx context.Context) {
	r.sample(time.Now())
	for _, rep := range r.node.Replicas() {
		if rep.IsLeader() && rep.Desc() != nil {
			r.Queue(rep.Desc())
		}
	}
}

// Crossed notes the size of range d measured as it crossed its split
// line, and reports it.
func (r *Reporter) Crossed(d *tidekvpb.RangeDescriptor, bytes uint64) {
	r.load.SetBytes(d.GetRangeId(), rangeload.SpanOf(d), bytes)
	r.Queue(d)
}
