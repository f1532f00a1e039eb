package sim

import (
	"time"

	"github.com/tidekv/tidekv/internal/placement"
)

// How placement learns a range's load, as internal/server does it: every
// ReportEvery each node samples the ranges it leads (node i's samples are
// offset by (i−1) ticks, as the nodes' report loops start at different
// times) and reports each range's rate over the window, that is, the
// requests it served since its previous sample over the window's length. A
// sample is fresh only when the same node led the range with the same span
// for the whole window. A new leaseholder, or a range whose span changed
// (split, merge), reports at once with no rate yet and a stale mark. The
// policy sees the last report, never the model's true rates.

// loadReporter holds the windows being sampled and the last reports.
type loadReporter struct {
	windows map[uint64]*loadWindow // by range
	reports map[uint64]loadReport  // by range
	next    map[uint64]time.Time   // each node's next sample
}

// loadWindow is what a range's leaseholder has counted since its last
// sample.
type loadWindow struct {
	holder      uint64
	lo, hi      int
	full        bool // the window began under this holder and span
	reqs, reads float64
}

// loadReport is a range's load as the placement controller last heard it.
type loadReport struct {
	qps, reads, hotShare float64
	// writes is the window's write rate by origin locality.
	writes map[string]float64
	stale  bool
}

// observeLoad accumulates dt of requests into each range's window, starts a
// new window (and reports at once) when a range's leaseholder or span
// changed, and takes the samples that are due. With ReportEvery zero the
// reports are the true rates, never stale.
func (s *Sim) observeLoad(dt time.Duration) {
	rp := &s.reporter
	if rp.windows == nil {
		rp.windows, rp.reports, rp.next = map[uint64]*loadWindow{}, map[uint64]loadReport{}, map[uint64]time.Time{}
	}
	every := s.opts.ReportEvery
	live := map[uint64]bool{}
	for _, r := range s.ranges {
		live[r.id] = true
		if every == 0 {
			rp.reports[r.id] = loadReport{qps: r.qps, reads: r.reads, hotShare: r.hotShare, writes: s.writesByOrigin(r.qps - r.reads)}
			continue
		}
		w := rp.windows[r.id]
		if w == nil || w.holder != r.lease || w.lo != r.lo || w.hi != r.hi {
			w = &loadWindow{holder: r.lease, lo: r.lo, hi: r.hi}
			rp.windows[r.id] = w
			rp.reports[r.id] = loadReport{hotShare: r.hotShare, stale: true}
		}
		if w.holder != 0 && s.up(w.holder) {
			w.reqs += r.qps * dt.Seconds()
			w.reads += r.reads * dt.Seconds()
		}
	}
	for id := range rp.reports {
		if !live[id] {
			delete(rp.reports, id)
			delete(rp.windows, id)
		}
	}
	if every == 0 {
		return
	}
	now := s.clock.Now()
	for _, n := range s.nodes {
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
		s.sampleNode(n.id, every)
	}
}

// sampleNode reports every range node leads and starts its next window.
func (s *Sim) sampleNode(node uint64, every time.Duration) {
	rp := &s.reporter
	for _, r := range s.ranges {
		w := rp.windows[r.id]
		if w == nil || w.holder != node || !s.up(node) {
			continue
		}
		rp.reports[r.id] = loadReport{qps: w.reqs / every.Seconds(), reads: w.reads / every.Seconds(),
			hotShare: r.hotShare, stale: !w.full, writes: s.writesByOrigin((w.reqs - w.reads) / every.Seconds())}
		w.reqs, w.reads, w.full = 0, 0, true
	}
}

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
