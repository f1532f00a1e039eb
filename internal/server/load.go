package server

import (
	"sync"
	"time"

	"github.com/tidekv/tidekv/internal/keys"
)

// rangeLoad is a range's recent request rate and size as seen by this node.
type rangeLoad struct {
	qps   float64
	bytes uint64
}

// loadTracker turns the replicas' request counters into rates, once per
// report interval.
type loadTracker struct {
	mu     sync.Mutex
	at     time.Time
	counts map[uint64]uint64
	ranges map[uint64]rangeLoad
}

// sampleRangeLoad measures every local replica's request rate since the
// previous sample and its data size, and exports the busiest as metrics.
func (s *Server) sampleRangeLoad(now time.Time) {
	counts := map[uint64]uint64{}
	sizes := map[uint64]uint64{}
	for _, r := range s.store.Replicas() {
		d := r.Desc()
		if d == nil {
			continue
		}
		counts[r.RangeID()] = r.Requests()
		lo, hi := keys.DataSpan(d.GetRangeId(), d.GetStartKey(), d.GetEndKey())
		if n, err := s.eng.ApproximateSize(lo, hi); err == nil {
			sizes[r.RangeID()] = n
		}
	}
	t := &s.load
	t.mu.Lock()
	ranges := map[uint64]rangeLoad{}
	dt := now.Sub(t.at).Seconds()
	for id, c := range counts {
		l := rangeLoad{bytes: sizes[id]}
		if prev, ok := t.counts[id]; ok && dt > 0 && c >= prev {
			l.qps = float64(c-prev) / dt
		}
		ranges[id] = l
	}
	t.at, t.counts, t.ranges = now, counts, ranges
	t.mu.Unlock()
	s.metrics.setTopRanges(ranges, func(id uint64) bool {
		r := s.store.GetReplica(id)
		return r != nil && r.IsLeader()
	})
}

// rangeLoadOf returns the last sample of a range's load.
func (s *Server) rangeLoadOf(rangeID uint64) rangeLoad {
	s.load.mu.Lock()
	defer s.load.mu.Unlock()
	return s.load.ranges[rangeID]
}
