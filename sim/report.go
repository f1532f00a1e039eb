package sim

import (
	"maps"
	"math"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/rangeload"
)

// How placement learns a range's load, with the server's own load table
// (internal/rangeload): each node keeps a rangeload.Tracker and running
// request counters for its replicas, which the leaseholder's replica
// advances with the requests the model serves. Every ReportEvery a node
// samples its replicas (node i's samples are offset by (i−1) ticks, as the
// nodes' report loops start at different times), and the policy sees what
// the leaseholder would report at once: Tracker.Of for the range's span
// and lease. So a sample is fresh exactly when the server's is: one lease
// (a term on that node) counted the whole window over the same span. A
// replica change leaves it fresh; a new leaseholder, or a split or merge,
// reports no rate and stale until a whole window has been counted. A node
// that goes down loses its table and counters, as a restarted process
// does. The policy never sees the model's true rates.

// loadReporter holds the nodes' load tables and the last reports.
type loadReporter struct {
	nodes   map[uint64]*nodeLoad  // by node, while it is up
	leases  map[uint64]leaseTerm  // by range
	reports map[uint64]loadReport // by range
	next    map[uint64]time.Time  // each node's next sample
}

// nodeLoad is one node's load table and its replicas' running counters
// (requests and reads served, by range).
type nodeLoad struct {
	table  rangeload.Tracker
	counts map[uint64][2]float64
}

// leaseTerm is a range's leaseholder and the term of its lease: each new
// leaseholder is a new term, as a lease transfer is in Raft.
type leaseTerm struct{ holder, term uint64 }

// loadReport is a range's load as the placement controller last heard it.
type loadReport struct {
	qps, reads, hotShare float64
	// writes is the window's write rate by origin locality.
	writes map[string]float64
	stale  bool
}

// observeLoad counts dt of requests on each range's leaseholder, takes the
// samples that are due, and reports every range whose leaseholder is up.
// With ReportEvery zero the reports are the true rates, never stale.
func (s *Sim) observeLoad(dt time.Duration) {
	rp := &s.reporter
	if rp.reports == nil {
		rp.nodes, rp.leases, rp.reports, rp.next = map[uint64]*nodeLoad{}, map[uint64]leaseTerm{}, map[uint64]loadReport{}, map[uint64]time.Time{}
	}
	every := s.opts.ReportEvery
	live := map[uint64]bool{}
	for _, r := range s.ranges {
		live[r.id] = true
		if every == 0 {
			rp.reports[r.id] = loadReport{qps: r.qps, reads: r.reads, hotShare: r.hotShare, writes: s.writesByOrigin(r.qps - r.reads)}
			continue
		}
		if l := rp.leases[r.id]; l.holder != r.lease {
			rp.leases[r.id] = leaseTerm{holder: r.lease, term: l.term + 1}
		}
		if n := rp.node(s, r.lease); n != nil {
			c := n.counts[r.id]
			n.counts[r.id] = [2]float64{c[0] + r.qps*dt.Seconds(), c[1] + r.reads*dt.Seconds()}
		}
	}
	maps.DeleteFunc(rp.reports, func(id uint64, _ loadReport) bool { return !live[id] })
	maps.DeleteFunc(rp.leases, func(id uint64, _ leaseTerm) bool { return !live[id] })
	if every == 0 {
		return
	}
	now := s.clock.Now()
	for _, n := range s.nodes {
		if rp.node(s, n.id) == nil {
			delete(rp.next, n.id)
			continue
		}
		next, ok := rp.next[n.id]
		if !ok {
			next = now.Add(time.Duration(n.id-1) * s.opts.Tick % every)
		}
		if now.Before(next) {
			rp.next[n.id] = next
			continue
		}
		for next = next.Add(every); !now.Before(next); next = next.Add(every) {
		}
		rp.next[n.id] = next
		s.sampleNode(n.id, now)
	}
	for _, r := range s.ranges {
		if n := rp.node(s, r.lease); n != nil {
			l := n.table.Of(r.id, span(r), rp.leases[r.id].term, func() (uint64, uint64, bool) { return 0, 0, false })
			rp.reports[r.id] = loadReport{qps: l.QPS, reads: l.ReadQPS, hotShare: l.HotKeyShare, stale: l.Stale,
				writes: s.writesByOrigin(l.QPS - l.ReadQPS)}
		}
	}
}

// node is node id's load table while it is up (made when it comes up),
// nil otherwise: a node that went down forgets its table and counters.
func (rp *loadReporter) node(s *Sim, id uint64) *nodeLoad {
	if !s.up(id) {
		delete(rp.nodes, id)
		return nil
	}
	n := rp.nodes[id]
	if n == nil {
		n = &nodeLoad{counts: map[uint64][2]float64{}}
		rp.nodes[id] = n
	}
	return n
}

// sampleNode samples the counters of every replica on node at now into its
// load table, as the server's report loop does.
func (s *Sim) sampleNode(node uint64, now time.Time) {
	rp := &s.reporter
	n := rp.nodes[node]
	cs := map[uint64]rangeload.Counters{}
	for _, r := range s.ranges {
		if _, ok := r.has(node); !ok {
			continue
		}
		var term uint64
		if r.lease == node {
			term = rp.leases[r.id].term
		}
		c := n.counts[r.id]
		cs[r.id] = rangeload.Counters{Requests: uint64(math.Round(c[0])), Reads: uint64(math.Round(c[1])),
			HotKeyShare: r.hotShare, Span: span(r), Term: term}
	}
	for id := range n.counts {
		if _, ok := cs[id]; !ok {
			delete(n.counts, id)
		}
	}
	n.table.Sample(now, cs)
}

// span is r's key span as the load table keys its samples.
func span(r *rangeState) rangeload.Span { return rangeload.Span{Start: r.start, End: r.end} }

// observed is range r as the policy sees it: the model's layout with the
// last reported load.
func (s *Sim) observed(r *rangeState) placement.Range {
	rep, ok := s.reporter.reports[r.id]
	if !ok { // before the first tick
		rep = loadReport{qps: r.qps, reads: r.reads, hotShare: r.hotShare, writes: s.writesByOrigin(r.qps - r.reads)}
	}
	return placement.Range{
		ID: r.id, Start: append([]byte(nil), r.start...), End: append([]byte(nil), r.end...),
		Replicas: append([]placement.Replica(nil), r.replicas...), Leaseholder: r.lease, Bytes: uint64(r.bytes),
		QPS: rep.qps, ReadQPS: rep.reads, HotKeyShare: rep.hotShare,
		LoadStale: rep.stale, Writes: rep.writes,
	}
}

// writesByOrigin splits a write rate by the workload's origins (nil when
// it names none).
func (s *Sim) writesByOrigin(rate float64) map[string]float64 {
	if len(s.workload.WriteOrigins) == 0 || rate <= 0 {
		return nil
	}
	out := make(map[string]float64, len(s.workload.WriteOrigins))
	for l, f := range s.workload.WriteOrigins {
		out[l] = rate * f
	}
	return out
}
