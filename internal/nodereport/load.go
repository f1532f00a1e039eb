package nodereport

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/rangeload"
)

// sample measures every local replica's request rate since the previous
// sample and its data size (the load table: rangeload), and exports the
// busiest as metrics.
func (r *Reporter) sample(now time.Time) {
	sizes := r.h.Sizes
	cs := map[uint64]rangeload.Counters{}
	local := map[uint64]bool{}
	recount := sizes.RecountAfter()
	for _, rep := range r.node.Replicas() {
		d := rep.Desc()
		if d == nil {
			continue
		}
		c := rangeload.Counters{Requests: rep.Requests(), Reads: rep.Reads(), HotKeyShare: rep.HotKeyShare(),
			Span: rangeload.SpanOf(d), Term: rep.LeaderTerm(), SpanChanges: rep.SpanChanges()}
		if n, err := sizes.RangeSize(rep, recount); err == nil {
			c.Bytes = n
		}
		cs[rep.RangeID()] = c
		local[rep.RangeID()] = true
	}
	sizes.Forget(local)
	for id, c := range cs {
		c.Keys, c.Writes = sizes.Keys(id), r.takeWrites(id)
		cs[id] = c
	}
	led := map[uint64]float64{}
	for id, l := range r.load.Sample(now, cs) {
		if rep := r.node.Replica(id); rep != nil && rep.IsLeader() {
			led[id] = l.QPS
		}
	}
	r.h.Metrics.SetTopRanges(led)
}

// replicaReads is the last sample's read rate of each local replica that
// served reads without leading its range (a follower or learner read),
// at the range's current span. The generation is the current
// descriptor's, for a meta leaseholder that matches by generation only (a
// binary from before spans).
func (r *Reporter) replicaReads() []*tidekvpb.ReplicaReads {
	var out []*tidekvpb.ReplicaReads
	r.load.Each(func(id uint64, l rangeload.Load) {
		rep := r.node.Replica(id)
		if l.ReadQPS <= 0 || rep == nil || rep.IsLeader() || !rangeload.SpanOf(rep.Desc()).Equal(l.Span) {
			return
		}
		out = append(out, &tidekvpb.ReplicaReads{RangeId: id, StartKey: l.Span.Start, EndKey: l.Span.End,
			Generation: rep.Desc().GetGeneration(), ReadQps: l.ReadQPS})
	})
	return out
}

// rangeLoadOf returns the last sample of a range's load for descriptor d,
// led now in term (rangeload.Tracker.Of), measuring its size afresh after
// a split or merge.
func (r *Reporter) rangeLoadOf(d *tidekvpb.RangeDescriptor, term uint64) rangeload.Load {
	return r.load.Of(d.GetRangeId(), rangeload.SpanOf(d), term, func() (uint64, uint64, bool) {
		rep := r.node.Replica(d.GetRangeId())
		if rep == nil {
			return 0, 0, false
		}
		n, err := r.h.Sizes.RangeSize(rep, r.h.Sizes.RecountAfter())
		return n, r.h.Sizes.Keys(d.GetRangeId()), err == nil
	})
}

// originCounts counts a range's writes by origin locality in the current
// window.
type originCounts struct {
	mu     sync.Mutex
	counts map[string]uint64
}

// NoteWrite counts one write to rep's range from the request's origin,
// when this node holds the lease (elsewhere the write is refused anyway).
func (r *Reporter) NoteWrite(ctx context.Context, rep *raftstore.Replica) {
	if !rep.IsLeader() {
		return
	}
	rangeID := rep.RangeID()
	origin := ""
	// Not FromIncomingContext: it copies all of the request's metadata,
	// once per write.
	if v := metadata.ValueFromIncomingContext(ctx, OriginMetadataKey); len(v) > 0 {
		origin = v[0]
	}
	v, ok := r.origins.Load(rangeID)
	if !ok {
		v, _ = r.origins.LoadOrStore(rangeID, &originCounts{counts: map[string]uint64{}})
	}
	oc := v.(*originCounts)
	oc.mu.Lock()
	oc.counts[origin]++
	oc.mu.Unlock()
}

// takeWrites returns and resets a range's window of write counts (each
// load sample takes them).
func (r *Reporter) takeWrites(rangeID uint64) map[string]uint64 {
	v, ok := r.origins.Load(rangeID)
	if !ok {
		return nil
	}
	oc := v.(*originCounts)
	oc.mu.Lock()
	defer oc.mu.Unlock()
	out := oc.counts
	oc.counts = map[string]uint64{}
	return out
}
