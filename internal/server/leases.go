package server

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// OriginMetadataKey is the gRPC metadata key under which clients name the
// locality their writes come from ("region=eu,zone=a"). Leaseholders count
// writes by it and move leases toward the writers.
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

// takeWrites returns and resets a range's window of write counts.
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

// leaseLoadFreshness is how recent a node's load sample must be for the node
// to count as live when choosing where a lease goes.
const leaseLoadFreshness = 3 * time.Second

// followWriters, every LeaseRebalanceInterval, asks the lease policy about
// each range this node leads and hands leases to where their writes come
// from. A range keeps a moved lease for at least two windows.
func (s *Server) followWriters(ctx context.Context) {
	now := time.Now()
	loads := map[uint64]*tidekvpb.NodeLoad{}
	for _, l := range s.loads.list() {
		loads[l.GetNodeId()] = l
	}
	for _, r := range s.store.Replicas() {
		writes := s.takeWrites(r.RangeID())
		d := r.Desc()
		if !r.IsLeader() || d == nil || len(writes) == 0 {
			continue
		}
		if last, ok := s.leaseMoved.Load(r.RangeID()); ok && now.Sub(last.(time.Time)) < 2*s.cfg.LeaseRebalanceInterval {
			continue
		}
		in := placement.LeaseInput{Leaseholder: s.nodeID, Writes: writes}
		for _, rd := range d.GetReplicas() {
			c := placement.LeaseCandidate{Node: rd.GetNodeId(), Voter: rd.GetType() == tidekvpb.ReplicaType_VOTER}
			if n, ok := s.dir.get(rd.GetNodeId()); ok {
				c.Locality = n.GetLocality()
			}
			if l := loads[rd.GetNodeId()]; l != nil {
				// A node that does not trust its clock takes no leases.
				c.Live = now.Sub(time.Unix(0, l.GetUnixNanos())) < leaseLoadFreshness && !l.GetClockUntrusted()
				c.Score = l.GetScore()
			}
			in.Replicas = append(in.Replicas, c)
		}
		dec, ok := placement.FollowTheWriters(in, s.cfg.Lease)
		if !ok {
			continue
		}
		if err := r.TransferLease(dec.Target); err != nil {
			continue
		}
		s.leaseMoved.Store(r.RangeID(), now)
		s.events.Record("lease-transfer", rangeSubject(r.RangeID()), "lease moving from node %d to node %d to follow the writers: %s", s.nodeID, dec.Target, dec.Reason)
	}
}
