package server

import (
	"context"
	"sync"

	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/internal/raftstore"
)

// OriginMetadataKey is the gRPC metadata key under which clients name the
// locality their writes come from ("region=eu,zone=a"). Leaseholders count
// writes by it and report the rates with each range's load (load.go); the
// control loop moves leases toward the writers (placement's
// follow-writers policy).
const OriginMetadataKey = "tidekv-origin"

// originCounts counts a range's writes by origin locality in the current
// window.
type originCounts struct {
	mu     sync.Mutex
	counts map[string]uint64
}

// noteWrite counts one write to r's range from the request's origin, when
// this node holds the lease (elsewhere the write is refused anyway).
func (s *Server) noteWrite(ctx context.Context, r *raftstore.Replica) {
	if !r.IsLeader() {
		return
	}
	rangeID := r.RangeID()
	origin := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(OriginMetadataKey); len(v) > 0 {
			origin = v[0]
		}
	}
	v, ok := s.origins.Load(rangeID)
	if !ok {
		v, _ = s.origins.LoadOrStore(rangeID, &originCounts{counts: map[string]uint64{}})
	}
	oc := v.(*originCounts)
	oc.mu.Lock()
	oc.counts[origin]++
	oc.mu.Unlock()
}

// takeWrites returns and resets a range's window of write counts (each
// load sample takes them).
func (s *Server) takeWrites(rangeID uint64) map[string]uint64 {
	v, ok := s.origins.Load(rangeID)
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
