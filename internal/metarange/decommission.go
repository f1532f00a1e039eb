package metarange

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Decommission marks a node draining (or, with drain=false, no longer
// draining) in its meta record, so placement moves its replicas away one
// at a time and nothing new comes to it. It answers how many replicas the
// directory still places on the node: 0 means it may be stopped.
func (h Handlers) Decommission(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.DecommissionRequest) (*tidekvpb.DecommissionResponse, error) {
	nodes, err := h.nodes(ctx, meta)
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
		return nil, kverr.Invalid("node %d is not a member of the cluster", req.GetNodeId())
	}
	if node.GetDraining() != req.GetDrain() {
		updated := proto.Clone(node).(*tidekvpb.NodeDescriptor)
		updated.Draining = req.GetDrain()
		if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{UpdateNode: updated}); err != nil {
			return nil, err
		}
		if req.GetDrain() {
			h.Node.Record("decommission", events.NodeSubject(node.GetNodeId()), "draining requested by an operator: its replicas move to other nodes one at a time")
		} else {
			h.Node.Record("recommission", events.NodeSubject(node.GetNodeId()), "decommission cancelled by an operator: the node takes replicas again")
		}
	}
	descs, err := raftstore.ReadMetaRanges(h.Node.Engine())
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
