package server

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Decommission marks a node draining (or, with drain=false, no longer
// draining) in its meta record, so placement moves its replicas away one
// at a time and nothing new comes to it. It answers how many replicas the
// directory still places on the node: 0 means it may be stopped.
func (a *adminService) Decommission(ctx context.Context, req *tidekvpb.DecommissionRequest) (*tidekvpb.DecommissionResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := adminroute.Meta(ctx, s.route, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.DecommissionResponse, error) {
		return s.decommissionLocal(ctx, meta, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.DecommissionResponse, error) {
		return c.Decommission(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (s *Server) decommissionLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.DecommissionRequest) (*tidekvpb.DecommissionResponse, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	nodes, err := raftstore.ReadMetaNodes(s.eng)
	if err != nil {
		return nil, err
	}
	var node *tidekvpb.NodeDescriptor
	for _, n := range nodes {
		if n.GetNodeId() == req.GetNodeId() {
			node = n
		}
	}
	if node == nil {
		return nil, invalidArg("node %d is not a member of the cluster", req.GetNodeId())
	}
	if node.GetDraining() != req.GetDrain() {
		updated := proto.Clone(node).(*tidekvpb.NodeDescriptor)
		updated.Draining = req.GetDrain()
		if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{UpdateNode: updated}); err != nil {
			return nil, err
		}
		if req.GetDrain() {
			s.events.Record("decommission", events.NodeSubject(node.GetNodeId()), "draining requested by an operator: its replicas move to other nodes one at a time")
		} else {
			s.events.Record("recommission", events.NodeSubject(node.GetNodeId()), "decommission cancelled by an operator: the node takes replicas again")
		}
	}
	descs, err := raftstore.ReadMetaRanges(s.eng)
	if err != nil {
		return nil, err
	}
	left := uint32(0)
	for _, d := range descs {
		for _, rd := range d.GetReplicas() {
			if rd.GetNodeId() == req.GetNodeId() {
				left++
			}
		}
	}
	return &tidekvpb.DecommissionResponse{Replicas: left}, nil
}
