package server

import (
	"context"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/rangeops"
)

// The operations that change one range run in internal/rangeops, on the
// range's leaseholder; the admin service and the control loop's operators
// call them through rangeOps.

func (a *adminService) Merge(ctx context.Context, req *tidekvpb.MergeRequest) (*tidekvpb.MergeResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := a.s.rangeOps().Merge(ctx, req)
	return resp, a.s.toStatus(err)
}

func (a *adminService) FreezeRange(ctx context.Context, req *tidekvpb.FreezeRangeRequest) (*tidekvpb.FreezeRangeResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	d, err := a.s.rangeOps().FreezeRange(ctx, req)
	if err != nil {
		return nil, a.s.toStatus(err)
	}
	return &tidekvpb.FreezeRangeResponse{Desc: d}, nil
}

// rangeOps runs the node's range operations through its admin routing.
func (s *Server) rangeOps() rangeops.Ops {
	return rangeops.Ops{Node: rangeNode{s}, Route: s.peers.route}
}

// rangeNode is the node as its range operations see it.
type rangeNode struct{ s *Server }

func (n rangeNode) ID() uint64                              { return n.s.id.node }
func (n rangeNode) Replica(id uint64) *raftstore.Replica    { return n.s.store.GetReplica(id) }
func (n rangeNode) LookupKey(key []byte) *raftstore.Replica { return n.s.store.LookupKey(key) }
func (n rangeNode) Addr(id uint64) (string, bool)           { return n.s.peers.dir.Addr(id) }
func (n rangeNode) CheckKey(key []byte) error               { return n.s.checkKey(key) }
func (n rangeNode) Learn(ctx context.Context, key []byte)   { n.s.ks.Learn(ctx, key) }
func (n rangeNode) SplitBytes() uint64                      { return n.s.clusterConfig().Placement.SplitBytes() }

func (n rangeNode) IsMember(id uint64) bool {
	_, ok := n.s.peers.dir.Get(id)
	return ok
}

func (n rangeNode) Directory(ctx context.Context) (*tidekvpb.RangesResponse, error) {
	return n.s.ranges(ctx)
}

func (n rangeNode) AllocRangeID(ctx context.Context) (uint64, error) { return n.s.allocRangeID(ctx) }

func (n rangeNode) ClockUntrusted(node uint64) error {
	if n.s.clockUntrustedOn(node) {
		return errClockUntrusted
	}
	return nil
}

func (n rangeNode) Record(kind, subject, reasonFormat string, args ...any) {
	n.s.events.Record(kind, subject, reasonFormat, args...)
}
