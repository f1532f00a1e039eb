package nemesis

import (
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// A move picks, by its pick, a range with no replica on the destination
// and one of that range's voters (never a learner) to move from.
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
	seen := map[[2]uint64]bool{}
	for pick := range uint64(30) {
		r, from, ok := pickMove(resp, 4, pick)
		if !ok || r != 7 || from < 1 || from > 3 {
			t.Fatalf("pick %d: range %d from node %d (%v), want range 7 (the only one off node 4)", pick, r, from, ok)
		}
		seen[[2]uint64{r, from}] = true
	}
	if len(seen) != 3 {
		t.Fatalf("30 picks moved from %v, want each of range 7's voters", seen)
	}
	// Node 1 holds every range, one of them as a learner.
	if r, from, ok := pickMove(resp, 1, 0); ok {
		t.Fatalf("a move of range %d from %d to node 1, which has a learner of range 5", r, from)
	}
	if _, _, ok := pickMove(&tidekvpb.RangesResponse{Ranges: resp.Ranges[:1]}, 2, 0); ok {
		t.Fatal("a move to a node that has every range")
	}
}
