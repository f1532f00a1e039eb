package nemesis

import (
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// A move picks, by its pick, a range with a voter on the node it moves
// off and a node with no replica of that range (a learner counts) to move
// it to.
func TestPickMove(t *testing.T) {
	rng := func(id uint64, voters []uint64, learner uint64) *tidekvpb.RangeInfo {
		d := &tidekvpb.RangeDescriptor{RangeId: id}
		for _, n := range voters {
			d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: n, Type: tidekvpb.ReplicaType_VOTER})
		}
		if learner != 0 {
			d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: learner, Type: tidekvpb.ReplicaType_LEARNER})
		}
		return &tidekvpb.RangeInfo{Desc: d}
	}
	resp := &tidekvpb.RangesResponse{Ranges: []*tidekvpb.RangeInfo{
		rng(7, []uint64{3, 1, 2}, 0), rng(2, []uint64{1, 2, 4}, 0), rng(5, []uint64{2, 3, 4}, 1), rng(9, []uint64{1, 3, 4}, 0)}}
	for n := range uint64(5) {
		resp.Nodes = append(resp.Nodes, &tidekvpb.NodeDescriptor{NodeId: 5 - n})
	}
	seen := map[[2]uint64]bool{}
	for pick := range uint64(60) {
		r, to, ok := pickMove(resp, 1, pick)
		if !ok || (r != 7 && r != 2 && r != 9) || to == 1 || to < 1 || to > 5 {
			t.Fatalf("pick %d: range %d to node %d (%v)", pick, r, to, ok)
		}
		seen[[2]uint64{r, to}] = true
	}
	// Ranges 7, 2 and 9 hold node 1's voters (range 5 only a learner);
	// each has two nodes free.
	want := map[[2]uint64]bool{{7, 4}: true, {7, 5}: true, {2, 3}: true, {2, 5}: true, {9, 2}: true, {9, 5}: true}
	if len(seen) != len(want) {
		t.Fatalf("60 picks moved %v, want %v", seen, want)
	}
	for k := range seen {
		if !want[k] {
			t.Fatalf("60 picks moved %v, want %v", seen, want)
		}
	}
	// With node 5 gone node 3's ranges have one node free at most (range
	// 5 none); a node with no voter has nothing to move.
	resp.Nodes = resp.Nodes[1:]
	if r, to, ok := pickMove(resp, 3, 0); !ok || r != 7 || to != 4 {
		t.Fatalf("node 3's first move: range %d to %d (%v), want range 7 to node 4", r, to, ok)
	}
	if r, to, ok := pickMove(&tidekvpb.RangesResponse{Ranges: resp.Ranges[:1], Nodes: resp.Nodes}, 4, 0); ok {
		t.Fatalf("a move of range %d to %d off node 4, which has no voter", r, to)
	}
}
