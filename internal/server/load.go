package server

import (
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// rangeLoad is a range's recent request rate and size as seen by this node.
type rangeLoad struct {
	qps, readQPS float64
	bytes        uint64
	// keys: live keys at the range's last exact size count.
	keys uint64
	// hotKeyShare: the share of sampled requests on the hottest key.
	hotKeyShare float64
	// gen is the descriptor generation the sample was taken at.
	gen uint64
	// term is the Raft term of the lease the sample was taken under (0: not
	// the leaseholder); stale says the sample does not cover a whole
	// window of that lease with this descriptor (the lease or the range's
	// span is newer than the previous sample), so its rates understate the
	// load and placement must not act on them.
	term  uint64
	stale bool
	// changing: the leaseholder was running a replica change; garbage,
	// its GC queue's estimate (both only in the meta range's copy of
	// reports).
	changing bool
	garbage  uint64
	// writes is the window's writes per second by origin locality
	// (leases.go), for leases to follow their writers.
	writes map[string]float64
}

// loadTracker turns the replicas' request counters into rates, once per
// report interval.
type loadTracker struct {
	mu     sync.Mutex
	at     time.Time
	counts map[uint64][2]uint64 // requests, reads
	ranges map[uint64]rangeLoad
}

// sampleRangeLoad measures every local replica's request rate since the
// previous sample and its data size, and exports the busiest as metrics.
func (s *Server) sampleRangeLoad(now time.Time) {
	counts := map[uint64][2]uint64{}
	sizes := map[uint64]uint64{}
	hot := map[uint64]float64{}
	gens := map[uint64]uint64{}
	terms := map[uint64]uint64{}
	local := map[uint64]bool{}
	recount := s.recountAfter()
	for _, r := range s.store.Replicas() {
		d := r.Desc()
		if d == nil {
			continue
		}
		counts[r.RangeID()] = [2]uint64{r.Requests(), r.Reads()}
		hot[r.RangeID()] = r.HotKeyShare()
		gens[r.RangeID()] = d.GetGeneration()
		terms[r.RangeID()] = r.LeaderTerm()
		local[r.RangeID()] = true
		if n, err := s.rangeSize(r, d.GetGeneration(), recount); err == nil {
			sizes[r.RangeID()] = n
		}
	}
	s.sizes.forget(local)
	t := &s.load
	t.mu.Lock()
	ranges := map[uint64]rangeLoad{}
	dt := now.Sub(t.at).Seconds()
	for id, c := range counts {
		l := rangeLoad{bytes: sizes[id], keys: s.sizes.keys(id), hotKeyShare: hot[id], gen: gens[id], term: terms[id], stale: true}
		writes := s.takeWrites(id)
		if prev, ok := t.counts[id]; ok && dt > 0 && c[0] >= prev[0] && c[1] >= prev[1] {
			l.qps = float64(c[0]-prev[0]) / dt
			l.readQPS = float64(c[1]-prev[1]) / dt
			l.writes = perSecond(writes, dt)
			l.stale = !coversWindow(t.ranges[id], l)
		}
		ranges[id] = l
	}
	t.at, t.counts, t.ranges = now, counts, ranges
	t.mu.Unlock()
	led := map[uint64]float64{}
	for id, l := range ranges {
		if r := s.store.GetReplica(id); r != nil && r.IsLeader() {
			led[id] = l.qps
		}
	}
	s.metrics.SetTopRanges(led)
}

// replicaReads is the last sample's read rate of each local replica that
// served reads without leading its range (a follower or learner read),
// at the range's current span.
func (s *Server) replicaReads() []*tidekvpb.ReplicaReads {
	s.load.mu.Lock()
	defer s.load.mu.Unlock()
	var out []*tidekvpb.ReplicaReads
	for id, l := range s.load.ranges {
		r := s.store.GetReplica(id)
		if l.readQPS <= 0 || r == nil || r.IsLeader() || r.Desc().GetGeneration() != l.gen {
			continue
		}
		out = append(out, &tidekvpb.ReplicaReads{RangeId: id, Generation: l.gen, ReadQps: l.readQPS})
	}
	return out
}

// coversWindow reports whether sample cur covers a whole window of one
// lease: this node led the range in the same term, with the same span, at
// the previous sample prev as well.
func coversWindow(prev, cur rangeLoad) bool {
	return cur.term != 0 && prev.term == cur.term && prev.gen == cur.gen
}

// rangeLoadOf returns the last sample of a range's load for descriptor d,
// led now in term (the replica's LeaderTerm). A sample taken before d's
// generation (a split or merge since) says nothing about the range now: its
// size is measured afresh and its rates wait for the next sample, or
// placement would split the range again on its old numbers. A sample of
// another term (taken as a follower, or under an earlier lease) is stale.
func (s *Server) rangeLoadOf(d *tidekvpb.RangeDescriptor, term uint64) rangeLoad {
	s.load.mu.Lock()
	l := s.load.ranges[d.GetRangeId()]
	s.load.mu.Unlock()
	if l.gen == d.GetGeneration() {
		l.stale = l.stale || l.term != term || term == 0
		l.term = term
		return l
	}
	fresh := rangeLoad{gen: d.GetGeneration(), term: term, stale: true}
	if r := s.store.GetReplica(d.GetRangeId()); r != nil {
		if n, err := s.rangeSize(r, d.GetGeneration(), s.recountAfter()); err == nil {
			fresh.bytes, fresh.keys = n, s.sizes.keys(d.GetRangeId())
		}
	}
	return fresh
}

// perSecond turns a window's counts into rates (nil for none).
func perSecond(counts map[string]uint64, seconds float64) map[string]float64 {
	if len(counts) == 0 {
		return nil
	}
	out := make(map[string]float64, len(counts))
	for k, n := range counts {
		out[k] = float64(n) / seconds
	}
	return out
}
