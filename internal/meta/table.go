package meta

import (
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/rangeload"
)

// Table is what the meta leaseholder keeps in memory besides the
// replicated directory: who leads each range, and when each node last
// heartbeated with which load.
type Table struct {
	mu      sync.Mutex
	leaders map[uint64]uint64
	// load is each range's load as its leaseholder last reported it.
	load  map[uint64]rangeload.Load
	nodes map[uint64]*liveness
	// states is each node's state as last announced in an event.
	states map[uint64]string
	// since is when this node last became meta leaseholder; decisions that
	// need liveness wait a grace period after it.
	since time.Time
}

type liveness struct {
	lastSeen time.Time
	hb       *tidekvpb.NodeHeartbeatRequest
}

// NewTable is an empty table.
func NewTable() *Table {
	t := &Table{}
	t.Reset(time.Time{})
	return t
}

// Reset forgets everything learnt as leaseholder: this node became the
// meta leaseholder at since, and its term rebuilds the table.
func (t *Table) Reset(since time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.since = since
	t.leaders = map[uint64]uint64{}
	t.load = map[uint64]rangeload.Load{}
	t.nodes = map[uint64]*liveness{}
	t.states = map[uint64]string{}
}

// Settled reports whether liveness has been learnt from heartbeats: the
// node has led the meta range for settle (a few heartbeat intervals).
func (t *Table) Settled(now time.Time, settle time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return now.Sub(t.since) >= settle
}

// Report takes a leaseholder's report of its range. A report from an older
// lease (sent by the previous leaseholder just before it lost the lease)
// does not replace the new one's numbers. It returns whether the range is
// newly above splitBytes (grown, or a split half still above it): such a
// range should not wait for the next round to split.
func (t *Table) Report(req *tidekvpb.ReportRangeRequest, splitBytes uint64) (crossed bool) {
	d := req.GetDesc()
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, ok := t.load[d.GetRangeId()]
	if ok && req.GetLeaseTerm() < prev.Term && req.GetLeaseTerm() != 0 {
		return false
	}
	span := rangeload.SpanOf(d)
	crossed = req.GetBytes() > splitBytes && (!ok || prev.Bytes <= splitBytes || !prev.Span.Equal(span))
	t.leaders[d.GetRangeId()] = req.GetLeaderNodeId()
	t.load[d.GetRangeId()] = rangeload.Load{QPS: req.GetQps(), ReadQPS: req.GetReadQps(), Bytes: req.GetBytes(), Span: span,
		HotKeyShare: req.GetHotKeyShare(), Term: req.GetLeaseTerm(), Stale: req.GetLoadStale(), Changing: req.GetChangeInProgress(),
		Garbage: req.GetGarbageBytes(), Keys: req.GetKeys(), Writes: req.GetWritesByOrigin()}
	return crossed
}

// Heartbeat records that req's node heartbeated at at.
func (t *Table) Heartbeat(at time.Time, req *tidekvpb.NodeHeartbeatRequest) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nodes[req.GetNode().GetNodeId()] = &liveness{lastSeen: at, hb: req}
}

// LastHeartbeat is node's last heartbeat (nil if none since Reset).
func (t *Table) LastHeartbeat(node uint64) *tidekvpb.NodeHeartbeatRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.nodes[node]; l != nil {
		return l.hb
	}
	return nil
}

// Heartbeats calls fn with every node's last heartbeat.
func (t *Table) Heartbeats(fn func(node uint64, hb *tidekvpb.NodeHeartbeatRequest)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, l := range t.nodes {
		fn(id, l.hb)
	}
}

// LoadOf is range id's load as last reported.
func (t *Table) LoadOf(id uint64) rangeload.Load {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.load[id]
}

// RangeInfos are the directory's descriptors (the meta range's own left
// out) with their leaseholders and last reported loads.
func (t *Table) RangeInfos(descs []*tidekvpb.RangeDescriptor) []*tidekvpb.RangeInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*tidekvpb.RangeInfo
	for _, d := range descs {
		if d.GetRangeId() == keys.MetaRangeID {
			continue
		}
		l, ok := t.load[d.GetRangeId()]
		if ok && !l.Span.Equal(rangeload.SpanOf(d)) {
			// Reported over another span (before the range's last split or
			// merge): its size was the old span's, and placement would
			// split the left half again on it (urgent rounds come as soon
			// as 250 ms apart). A replica change leaves the span, and the
			// report stands.
			l.Bytes, l.Keys, l.Garbage, l.Stale = 0, 0, 0, true
		}
		out = append(out, &tidekvpb.RangeInfo{Desc: d, LeaderNodeId: t.leaders[d.GetRangeId()],
			Qps: l.QPS, ReadQps: l.ReadQPS, Bytes: l.Bytes, HotKeyShare: l.HotKeyShare, LeaseTerm: l.Term, LoadStale: l.Stale, ChangeInProgress: l.Changing,
			GarbageBytes: l.Garbage, Keys: l.Keys, WritesByOrigin: l.Writes})
	}
	return out
}

// Announce records node's state as announced; it returns the state last
// announced (seen false if none since Reset) and whether it changed.
func (t *Table) Announce(node uint64, state string) (prev string, seen, changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, seen = t.states[node]
	if prev == state {
		return prev, seen, false
	}
	t.states[node] = state
	return prev, seen, true
}

// LiveNodes returns the nodes that heartbeated within timeout of now, or
// nil within settle of becoming meta leaseholder (liveness unknown).
func (t *Table) LiveNodes(now time.Time, settle, timeout time.Duration) map[uint64]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.since) < settle {
		return nil
	}
	live := map[uint64]bool{}
	for id, l := range t.nodes {
		if now.Sub(l.lastSeen) < timeout {
			live[id] = true
		}
	}
	return live
}
