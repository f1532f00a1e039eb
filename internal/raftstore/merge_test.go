package raftstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// splitAt splits the test range at key into range id and waits for every
// node to hold the new range.
func (tc *testCluster) splitAt(t *testing.T, key string, id uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tc.leader(testRangeID).Split(ctx, []byte(key), id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		for _, s := range tc.stores {
			// One lookup: a placeholder replica may be swapped for the
			// split's between two.
			if r := s.GetReplica(id); r == nil || r.Desc() == nil {
				return false
			}
		}
		return true
	})
}

// freezeEverywhere freezes range rhs into lhs and waits until every replica
// applied the freeze (the coordinator's step 1).
func (tc *testCluster) freezeEverywhere(t *testing.T, rhs, lhs uint64) *tidekvpb.RangeDescriptor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	frozen, err := tc.leader(rhs).Freeze(ctx, lhs)
	if err != nil {
		t.Fatal(err)
	}
	// Each replica must have applied this freeze (its generation), as the
	// server's merge waits for, not just show one: a replica still frozen
	// by an earlier freeze may not have applied the unfreeze that came
	// between, and would thaw under the merge.
	waitFor(t, func() bool {
		for _, rd := range frozen.GetReplicas() {
			s := tc.stores[rd.GetNodeId()]
			if s == nil || s.GetReplica(rhs) == nil {
				return false
			}
			d := s.GetReplica(rhs).Desc()
			if d.GetGeneration() < frozen.GetGeneration() || d.GetMergingInto() != lhs {
				return false
			}
		}
		return true
	})
	return frozen
}

func TestMergeTakesOverTheFrozenNeighbour(t *testing.T) {
	tc := newTestCluster(t, 3)
	for i := range 20 {
		tc.put(fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i))
	}
	tc.splitAt(t, "k10", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	frozen := tc.freezeEverywhere(t, 3, testRangeID)

	// Frozen: writes, splits, replica changes and reads are refused (a read
	// served after the merge took the span elsewhere could miss a write
	// there; TestMergeKeepsTheRightRangesReads in internal/server).
	rhs := tc.leader(3)
	var fe *RangeFrozenError
	if _, err := rhs.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k15"), Value: []byte("x")}}); !errors.As(err, &fe) {
		t.Fatalf("write to a frozen range: %v", err)
	}
	if _, err := rhs.Split(ctx, []byte("k15"), 9); !errors.As(err, &fe) {
		t.Fatalf("split of a frozen range: %v", err)
	}
	if _, err := rhs.ChangeReplicas(ctx, 0, 2); !errors.As(err, &fe) {
		t.Fatalf("replica change of a frozen range: %v", err)
	}
	if v, ok, err := rhs.Get(ctx, []byte("k15"), ReadOptions{}); !errors.As(err, &fe) {
		t.Fatalf("read of a frozen range: %q %v %v", v, ok, err)
	}

	merged, err := tc.leader(testRangeID).Merge(ctx, frozen)
	if err != nil {
		t.Fatal(err)
	}
	if len(merged.GetEndKey()) != 0 || merged.GetGeneration() <= frozen.GetGeneration() {
		t.Fatalf("merged descriptor: %v", merged)
	}
	// Every node drops range 3 and keeps its data under range 2.
	waitFor(t, func() bool {
		for _, s := range tc.stores {
			if s.GetReplica(3) != nil || len(s.GetReplica(testRangeID).Desc().GetEndKey()) != 0 {
				return false
			}
		}
		return true
	})
	for i := range 20 {
		if v, ok := tc.get(fmt.Sprintf("k%02d", i)); !ok || v != fmt.Sprintf("v%d", i) {
			t.Fatalf("k%02d after the merge: %q %v", i, v, ok)
		}
	}
	tc.put("k15", "after")
	// Crash and restart every node: the merged state is what comes back.
	for _, id := range tc.nodes {
		tc.crash(id)
		tc.restart(id)
	}
	if v, _ := tc.get("k15"); v != "after" {
		t.Fatalf("k15 after restart: %q", v)
	}
	for _, s := range tc.stores {
		if s.GetReplica(3) != nil {
			t.Fatalf("range 3 came back on node %d", s.nodeID)
		}
	}
}

// A merge is refused, identically everywhere, when the ranges are not
// adjacent, the neighbour is not frozen into this range, or the replica
// sets differ; the neighbour can then be unfrozen and serves writes again.
func TestMergeRefusedThenUnfrozen(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("a", "1")
	tc.splitAt(t, "m", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lhs := tc.leader(testRangeID)
	notFrozen := tc.leader(3).Desc()
	if _, err := lhs.Merge(ctx, notFrozen); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("merge of an unfrozen neighbour: %v", err)
	}
	frozen := tc.freezeEverywhere(t, 3, testRangeID)
	other := proto.Clone(frozen).(*tidekvpb.RangeDescriptor)
	other.Replicas = other.Replicas[:2]
	if _, err := lhs.Merge(ctx, other); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("merge with different replicas: %v", err)
	}
	if _, err := tc.leader(3).Unfreeze(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.leader(3).Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("z"), Value: []byte("2")}}); err != nil {
		t.Fatalf("write after unfreeze: %v", err)
	}
	if len(lhs.Desc().GetEndKey()) == 0 {
		t.Fatal("a refused merge changed the left range")
	}
}
