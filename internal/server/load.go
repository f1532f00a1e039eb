package server

import (
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/rangeload"
)

// sampleRangeLoad measures every local replica's request rate since the
// previous sample and its data size (the load table: rangeload), and
// exports the busiest as metrics.
func (s *Server) sampleRangeLoad(now time.Time) {
	cs := map[uint64]rangeload.Counters{}
	local := map[uint64]bool{}
	recount := s.sizes.RecountAfter()
	for _, r := range s.store.Replicas() {
		d := r.Desc()
		if d == nil {
			continue
		}
		c := rangeload.Counters{Requests: r.Requests(), Reads: r.Reads(), HotKeyShare: r.HotKeyShare(),
			Gen: d.GetGeneration(), Term: r.LeaderTerm()}
		if n, err := s.sizes.RangeSize(r, d.GetGeneration(), recount); err == nil {
			c.Bytes = n
		}
		cs[r.RangeID()] = c
		local[r.RangeID()] = true
	}
	s.sizes.Forget(local)
	for id, c := range cs {
		c.Keys, c.Writes = s.sizes.Keys(id), s.takeWrites(id)
		cs[id] = c
	}
	led := map[uint64]float64{}
	for id, l := range s.load.Sample(now, cs) {
		if r := s.store.GetReplica(id); r != nil && r.IsLeader() {
			led[id] = l.QPS
		}
	}
	s.metrics.SetTopRanges(led)
}

// replicaReads is the last sample's read rate of each local replica that
// served reads without leading its range (a follower or learner read),
// at the range's current span.
func (s *Server) replicaReads() []*tidekvpb.ReplicaReads {
	var out []*tidekvpb.ReplicaReads
	s.load.Each(func(id uint64, l rangeload.Load) {
		r := s.store.GetReplica(id)
		if l.ReadQPS <= 0 || r == nil || r.IsLeader() || r.Desc().GetGeneration() != l.Gen {
			return
		}
		out = append(out, &tidekvpb.ReplicaReads{RangeId: id, Generation: l.Gen, ReadQps: l.ReadQPS})
	})
	return out
}

// rangeLoadOf returns the last sample of a range's load for descriptor d,
// led now in term (rangeload.Tracker.Of), measuring its size afresh after
// a split or merge.
func (s *Server) rangeLoadOf(d *tidekvpb.RangeDescriptor, term uint64) rangeload.Load {
	return s.load.Of(d.GetRangeId(), d.GetGeneration(), term, func() (uint64, uint64, bool) {
		r := s.store.GetReplica(d.GetRangeId())
		if r == nil {
			return 0, 0, false
		}
		n, err := s.sizes.RangeSize(r, d.GetGeneration(), s.sizes.RecountAfter())
		return n, s.sizes.Keys(d.GetRangeId()), err == nil
	})
}
