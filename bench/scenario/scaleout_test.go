package scenario

import (
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// A step ends once scaleoutCounts' names stop changing: a lease moving
// between nodes must change them as a replica moving does, a learner
// leaves the layout incomplete, and an adaptive learner counts nowhere.
func TestScaleoutCounts(t *testing.T) {
	voter := func(n uint64) *tidekvpb.ReplicaDescriptor {
		return &tidekvpb.ReplicaDescriptor{NodeId: n, Type: tidekvpb.ReplicaType_VOTER}
	}
	rng := func(leader uint64, reps ...*tidekvpb.ReplicaDescriptor) *tidekvpb.RangeInfo {
		return &tidekvpb.RangeInfo{Desc: &tidekvpb.RangeDescriptor{Replicas: reps}, LeaderNodeId: leader}
	}
	before := []*tidekvpb.RangeInfo{rng(1, voter(1), voter(2)), rng(1, voter(1), voter(2))}
	after := []*tidekvpb.RangeInfo{rng(1, voter(1), voter(2)), rng(2, voter(1), voter(2))}
	_, _, complete, a := scaleoutCounts(before, 2)
	_, leases, _, b := scaleoutCounts(after, 2)
	if !complete || a != "n1:2/2 n2:2/0 " || b != "n1:2/1 n2:2/1 " || leases[2] != 1 {
		t.Fatalf("counts %q then %q (complete %v): want a lease transfer to change them", a, b, complete)
	}
	learner := &tidekvpb.ReplicaDescriptor{NodeId: 3, Type: tidekvpb.ReplicaType_LEARNER}
	if _, _, complete, _ := scaleoutCounts([]*tidekvpb.RangeInfo{rng(1, voter(1), voter(2), learner)}, 2); complete {
		t.Fatal("a range with a learner on its way to voter counted as complete")
	}
	adaptive := &tidekvpb.ReplicaDescriptor{NodeId: 3, Type: tidekvpb.ReplicaType_LEARNER, Adaptive: true}
	if replicas, _, complete, _ := scaleoutCounts([]*tidekvpb.RangeInfo{rng(1, voter(1), voter(2), adaptive)}, 2); !complete || replicas[3] != 0 {
		t.Fatalf("an adaptive learner counted (replicas %v, complete %v)", replicas, complete)
	}
}
