package metarange

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The cluster's Raft log version (raftstore/logversion.go, docs/upgrades.md)
// is raised by the meta leaseholder as it serves heartbeats, and handed to
// every node in the heartbeat's answer.

// nodeLogVersion is the newest log version a node's binary applies; a
// binary from before log versions reports none and applies the first.
func nodeLogVersion(v uint32) uint32 { return max(v, raftstore.LogVersionBase) }

// nextLogVersion is the version the cluster may run at: the oldest binary's
// among the nodes that hold or may get replicas. A draining node that holds
// no replica is on its way out and is not waited for. It never goes below
// active (a version once raised stays), and says why it moves.
func nextLogVersion(active uint32, nodes []*tidekvpb.NodeDescriptor, ranges []*tidekvpb.RangeDescriptor) (uint32, string) {
	holds := map[uint64]bool{}
	for _, d := range ranges {
		for _, r := range d.GetReplicas() {
			holds[r.GetNodeId()] = true
		}
	}
	oldest := uint32(0)
	for _, n := range nodes {
		if n.GetDraining() && !holds[n.GetNodeId()] {
			continue
		}
		if v := nodeLogVersion(n.GetMaxLogVersion()); oldest == 0 || v < oldest {
			oldest = v
		}
	}
	if oldest <= active {
		return active, ""
	}
	return oldest, fmt.Sprintf("every node that holds or may hold replicas (%d) runs a binary that applies log version %d", len(nodes), oldest)
}

// raiseLogVersion raises the cluster's log version if every node allows it,
// and returns the version in force.
func (h Handlers) raiseLogVersion(ctx context.Context, meta *raftstore.Replica, nodes []*tidekvpb.NodeDescriptor) (uint32, error) {
	active, err := raftstore.ReadMetaLogVersion(h.Node.Engine())
	if err != nil {
		return 0, err
	}
	// Without the draining nodes the version can only be higher: if even
	// that is not above active, nothing moves (every heartbeat once the
	// cluster is upgraded), and the range directory need not be read.
	var staying []*tidekvpb.NodeDescriptor
	for _, n := range nodes {
		if !n.GetDraining() {
			staying = append(staying, n)
		}
	}
	if bound, _ := nextLogVersion(active, staying, nil); bound == active {
		return active, nil
	}
	ranges, err := raftstore.ReadMetaRanges(h.Node.Engine())
	if err != nil {
		return 0, err
	}
	next, why := nextLogVersion(active, nodes, ranges)
	if next == active {
		return active, nil
	}
	if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{RaiseLogVersion: next}); err != nil {
		return active, err
	}
	h.Node.Record("log-version", "cluster", "Raft log version raised from %d to %d: %s", active, next, why)
	return next, nil
}

// JoinRefused begins the answer to a node that must not join: the node
// stops trying (other failures to join are retried).
const JoinRefused = "join refused"

// checkJoinVersion refuses a node whose binary is older than the
// cluster's log version: it would misapply entries. It returns the
// version, which the node starts at.
func (h Handlers) checkJoinVersion(req *tidekvpb.JoinRequest) (uint32, error) {
	active, err := raftstore.ReadMetaLogVersion(h.Node.Engine())
	if err != nil {
		return 0, err
	}
	if v := nodeLogVersion(req.GetMaxLogVersion()); v < active {
		return 0, status.Errorf(codes.FailedPrecondition, JoinRefused+": the node's binary applies Raft log version %d and the cluster runs at %d; start it with a newer binary", v, active)
	}
	return active, nil
}
