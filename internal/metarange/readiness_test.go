package metarange

import (
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/meta"
)

func TestReplicationGap(t *testing.T) {
	node := func(id uint64, live bool, state string) *tidekvpb.NodeStatus {
		return &tidekvpb.NodeStatus{Node: &tidekvpb.NodeDescriptor{NodeId: id}, Live: live, State: state}
	}
	rng := func(id, leader uint64, reps ...*tidekvpb.ReplicaDescriptor) *tidekvpb.RangeInfo {
		return &tidekvpb.RangeInfo{Desc: &tidekvpb.RangeDescriptor{RangeId: id, Replicas: reps}, LeaderNodeId: leader}
	}
	voter := func(n uint64) *tidekvpb.ReplicaDescriptor {
		return &tidekvpb.ReplicaDescriptor{NodeId: n, Type: tidekvpb.ReplicaType_VOTER}
	}
	learner := &tidekvpb.ReplicaDescriptor{NodeId: 4, Type: tidekvpb.ReplicaType_LEARNER, Adaptive: true}
	incoming := &tidekvpb.ReplicaDescriptor{NodeId: 3, Type: tidekvpb.ReplicaType_VOTER_INCOMING}
	three := []*tidekvpb.NodeStatus{node(1, true, meta.StateLive), node(2, true, meta.StateLive), node(3, true, meta.StateLive)}
	draining := &tidekvpb.NodeStatus{Node: &tidekvpb.NodeDescriptor{NodeId: 4, Draining: true}, Live: true, State: meta.StateDraining}
	for _, tt := range []struct {
		name   string
		ranges []*tidekvpb.RangeInfo
		nodes  []*tidekvpb.NodeStatus
		live   int
		want   string
	}{
		{"fully replicated, an adaptive learner aside", []*tidekvpb.RangeInfo{rng(1, 1, voter(1), voter(2), voter(3)), rng(2, 2, voter(1), voter(2), voter(3), learner)}, three, 3, ""},
		{"meta range short", []*tidekvpb.RangeInfo{rng(1, 1, voter(1)), rng(2, 1, voter(1), voter(2), voter(3))}, three, 3, "the meta range has 1 of 3 voters on live nodes."},
		{"two live nodes need two voters", []*tidekvpb.RangeInfo{rng(1, 1, voter(1), voter(2), voter(3))}, []*tidekvpb.NodeStatus{node(1, true, meta.StateLive), node(2, true, meta.StateLive), node(3, false, meta.StateDead)}, 2, ""},
		{"a voter on a dead node does not count", []*tidekvpb.RangeInfo{rng(1, 1, voter(1), voter(2), voter(3)), rng(2, 1, voter(1), voter(3))}, []*tidekvpb.NodeStatus{node(1, true, meta.StateLive), node(2, true, meta.StateLive), node(3, false, meta.StateSuspect)}, 2, "range 2 has 1 of 2 voters on live nodes."},
		{"draining nodes are no target", []*tidekvpb.RangeInfo{rng(1, 1, voter(1), voter(2), voter(3))}, append(three, draining), 3, ""},
		{"replica change in flight", []*tidekvpb.RangeInfo{rng(2, 1, voter(1), voter(2), incoming)}, three, 3, "range 2 has a replica change in progress."},
		{"no leaseholder", []*tidekvpb.RangeInfo{rng(2, 0, voter(1), voter(2), voter(3))}, three, 3, "range 2 has no known leaseholder."},
		{"liveness unknown", []*tidekvpb.RangeInfo{rng(1, 1, voter(1))}, []*tidekvpb.NodeStatus{node(1, true, meta.StateLive), node(2, false, meta.StateUnknown)}, 0, "node 2 has not heartbeated to the meta leaseholder yet."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			live, got := replicationGap(tt.ranges, tt.nodes, 3)
			if live != tt.live || got != tt.want {
				t.Fatalf("replicationGap = %d, %q; want %d, %q", live, got, tt.live, tt.want)
			}
		})
	}
}
