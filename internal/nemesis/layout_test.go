package nemesis

import (
	"slices"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// layoutOf is a range directory: each range by its start (the next one's
// start ends it; the last is unbounded), its voters, the leaseholder the
// first voter.
func layoutOf(ranges ...struct {
	start  string
	voters []uint64
}) *tidekvpb.RangesResponse {
	resp := &tidekvpb.RangesResponse{}
	for i, r := range ranges {
		d := &tidekvpb.RangeDescriptor{RangeId: uint64(i + 1), StartKey: []byte(r.start)}
		if i+1 < len(ranges) {
			d.EndKey = []byte(ranges[i+1].start)
		}
		for _, n := range r.voters {
			d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: n, Type: tidekvpb.ReplicaType_VOTER})
		}
		resp.Ranges = append(resp.Ranges, &tidekvpb.RangeInfo{Desc: d, LeaderNodeId: r.voters[0]})
	}
	return resp
}

type rng = struct {
	start  string
	voters []uint64
}

var layoutKeys = []string{"txn/k0", "txn/k1", "txn/k2"}

// A range split picks a workload key, or the point just after one, that
// starts no range yet.
func TestPickSplit(t *testing.T) {
	resp := layoutOf(rng{"", []uint64{1, 2, 3}}, rng{"txn/k1", []uint64{1, 2, 3}}, rng{"txn/k1~", []uint64{1, 2, 3}})
	seen := map[string]bool{}
	for pick := range uint64(12) {
		k, ok := pickSplit(resp, layoutKeys, pick)
		if !ok {
			t.Fatal("no split point")
		}
		seen[k] = true
	}
	for _, want := range []string{"txn/k0", "txn/k0~", "txn/k2", "txn/k2~"} {
		if !seen[want] {
			t.Errorf("never split at %s: %v", want, seen)
		}
	}
	if len(seen) != 4 {
		t.Errorf("split at %v, which includes range starts", seen)
	}
}

// A merge picks a range inside the workload's span and its right
// neighbour, also inside, both with voters alone; the system's first
// range is left alone. The neighbour's voters move to the left range's
// nodes first.
func TestPickMerge(t *testing.T) {
	resp := layoutOf(rng{"", []uint64{1, 2, 3}}, rng{"txn/k0", []uint64{1, 2, 3}}, rng{"txn/k1", []uint64{3, 2, 1}},
		rng{"txn/k2", []uint64{1, 2, 4}}, rng{"txn/k2~", []uint64{4, 2, 1}})
	seen := map[uint64]uint64{}
	for pick := range uint64(9) {
		l, r, ok := pickMerge(resp, layoutKeys, pick)
		if !ok {
			t.Fatal("nothing to merge")
		}
		seen[l.GetRangeId()] = r.GetRangeId()
	}
	// Not range 1 (starts outside the span), not range 5 (no neighbour).
	if len(seen) != 3 || seen[2] != 3 || seen[3] != 4 || seen[4] != 5 {
		t.Fatalf("merged %v, want ranges 2, 3 and 4 each with the next", seen)
	}
	if got := colocate(resp.Ranges[2].Desc, resp.Ranges[3].Desc); !slices.Equal(got, [][2]uint64{{3, 4}}) {
		t.Fatalf("to put range 4 beside range 3: %v, want node 4's voter moved to node 3", got)
	}
	if got := colocate(resp.Ranges[1].Desc, resp.Ranges[2].Desc); len(got) != 0 {
		t.Fatalf("ranges 2 and 3 share their voters, yet %v", got)
	}
	// A learner on range 3 leaves only range 4 with range 5.
	resp.Ranges[2].Desc.Replicas[0].Type = tidekvpb.ReplicaType_LEARNER
	for pick := range uint64(3) {
		if l, _, ok := pickMerge(resp, layoutKeys, pick); !ok || l.GetRangeId() != 4 {
			t.Fatalf("with a learner on range 3, pick %d merged %v", pick, l)
		}
	}
}

// A lease transfer to a node picks a range of the workload's keys where
// it has a voter and not the lease.
func TestPickTransfer(t *testing.T) {
	resp := layoutOf(rng{"", []uint64{4, 2, 3}}, rng{"txn/k0", []uint64{4, 2, 3}}, rng{"txn/k1", []uint64{1, 2, 3}},
		rng{"txn/k2", []uint64{4, 1, 2}}, rng{"zzz", []uint64{1, 4, 2}})
	// Range 1 ends at k0 (outside), 2 and 4 lead on node 4 already, 3
	// has no voter there, 5 starts past the span.
	if id, ok := pickTransfer(resp, layoutKeys, 4, 0); ok {
		t.Fatalf("moved the lease of range %d to node 4", id)
	}
	for pick, want := range []uint64{2, 3, 4, 2} {
		if id, ok := pickTransfer(resp, layoutKeys, 2, uint64(pick)); !ok || id != want {
			t.Fatalf("transfer to node 2, pick %d: range %d (%v), want %d of 2, 3, 4", pick, id, ok, want)
		}
	}
}
