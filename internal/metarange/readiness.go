package metarange

import (
	"context"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/meta"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Readiness: a cluster is ready when losing any one node cannot take a
// range below quorum, i.e. when the meta range and every user range have
// their replication factor rf (see replicationGap). Liveness alone
// (/health) says nothing about that: a freshly bootstrapped cluster serves
// from node 1 alone for a few seconds while placement adds the other
// voters. It is judged from the range directory, the reported
// leaseholders and node liveness.
func (h Handlers) Readiness(ctx context.Context, meta *raftstore.Replica, rf int) (*tidekvpb.ReadinessResponse, error) {
	rs, err := h.Ranges(ctx, meta)
	if err != nil {
		return nil, err
	}
	ranges := append([]*tidekvpb.RangeInfo{{Desc: meta.Desc(), LeaderNodeId: h.Node.ID()}}, rs.GetRanges()...)
	live, reason := replicationGap(ranges, h.Node.Statuses(rs.GetNodes(), time.Now()), rf)
	return &tidekvpb.ReadinessResponse{Ready: reason == "", Reason: reason, ReplicationFactor: uint32(rf),
		LiveNodes: uint32(live), Ranges: uint32(len(ranges))}, nil
}

// replicationGap returns the number of live nodes (draining ones excluded)
// and, in one sentence, the first reason the ranges are not fully
// replicated, or "" when they are: each range needs min(rf, live nodes)
// voters on live nodes, no replica change in flight (a joint
// configuration) and a known leaseholder. A node the meta leaseholder has
// not heard from since it took over makes the target unknown, so it is a
// reason too.
func replicationGap(ranges []*tidekvpb.RangeInfo, nodes []*tidekvpb.NodeStatus, rf int) (int, string) {
	liveNode := map[uint64]bool{}
	live := 0
	for _, ns := range nodes {
		id := ns.GetNode().GetNodeId()
		if ns.GetState() == meta.StateUnknown {
			return 0, fmt.Sprintf("node %d has not heartbeated to the meta leaseholder yet.", id)
		}
		liveNode[id] = ns.GetLive()
		if ns.GetLive() && !ns.GetNode().GetDraining() {
			live++
		}
	}
	if live == 0 {
		return 0, "no node is live yet."
	}
	want := min(rf, live)
	for _, ri := range ranges {
		d := ri.GetDesc()
		name := fmt.Sprintf("range %d", d.GetRangeId())
		if d.GetRangeId() == keys.MetaRangeID {
			name = "the meta range"
		}
		voters := 0
		for _, rd := range d.GetReplicas() {
			switch rd.GetType() {
			case tidekvpb.ReplicaType_VOTER_INCOMING, tidekvpb.ReplicaType_VOTER_OUTGOING:
				return live, fmt.Sprintf("%s has a replica change in progress.", name)
			case tidekvpb.ReplicaType_VOTER:
				if liveNode[rd.GetNodeId()] {
					voters++
				}
			}
		}
		if voters < want {
			return live, fmt.Sprintf("%s has %d of %d voters on live nodes.", name, voters, want)
		}
		if ri.GetLeaderNodeId() == 0 {
			return live, fmt.Sprintf("%s has no known leaseholder.", name)
		}
	}
	return live, ""
}
