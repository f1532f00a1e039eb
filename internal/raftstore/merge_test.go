package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
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
	// Back at its span, yet with the split and the merge counted (and
	// not the replica changes or the freeze): load samples must not take
	// the counters as the whole span's across them (rangeload).
	for _, s := range tc.stores {
		if n := s.GetReplica(testRangeID).SpanChanges(); n != 2 {
			t.Fatalf("node %d: %d span changes after a split and a merge, want 2", s.nodeID, n)
		}
	}
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

// snapshotFailsOnce is a node's side of the network that drops one range's
// Raft messages while cut is set and breaks off that range's first
// snapshot where the data starts (a stream error); it notes whether the
// node's replica of range frozenID outlived that failure, still frozen.
type snapshotFailsOnce struct {
	*Store
	rangeID, frozenID uint64
	cut, tried        atomic.Bool
	failed            chan struct{} // closed after the first snapshot failed
	frozenSurvived    bool          // read after failed is closed
}

func (f *snapshotFailsOnce) HandleRaftMessage(m *tidekvpb.RaftMessage) {
	if m.GetRangeId() != f.rangeID || !f.cut.Load() {
		f.Store.HandleRaftMessage(m)
	}
}

func (f *snapshotFailsOnce) HandleSnapshot(header *tidekvpb.RaftMessage, data io.Reader) error {
	if header.GetRangeId() != f.rangeID || !f.tried.CompareAndSwap(false, true) {
		return f.Store.HandleSnapshot(header, data)
	}
	err := f.Store.HandleSnapshot(header, iotest.ErrReader(errors.New("stream reset")))
	r := f.Store.GetReplica(f.frozenID)
	f.frozenSurvived = r != nil && r.Desc().GetMergingInto() == f.rangeID
	close(f.failed)
	return err
}

// A replica of the left range that missed the merge entry learns the merge
// from a snapshot, which carries the merged span. Until that snapshot is
// applied the node's frozen right replica must stay: the snapshot may yet
// fail (here its stream breaks after the header was accepted), and the
// left replica may then apply the merge from its log, which needs the
// right replica's data there (applyMergeLocked stops the node otherwise).
func TestMergeLearntFromSnapshotKeepsFrozenReplicaUntilApplied(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.LogKeepEntries = 5 })
	for i := range 20 {
		tc.put(fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i))
	}
	tc.splitAt(t, "k10", 3)
	frozen := tc.freezeEverywhere(t, 3, testRangeID)
	tc.moveLease(1)
	gate := &snapshotFailsOnce{Store: tc.stores[3], rangeID: testRangeID, frozenID: 3, failed: make(chan struct{})}
	gate.cut.Store(true)
	tc.net.Register(3, gate)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tc.leader(testRangeID).Merge(ctx, frozen); err != nil {
		t.Fatal(err)
	}
	for i := range 30 { // the leader truncates its log past node 3's
		tc.put(fmt.Sprintf("m%02d", i), "v")
	}
	gate.cut.Store(false) // node 3 can only be sent snapshots now
	select {
	case <-gate.failed:
	case <-ctx.Done():
		t.Fatal("node 3 was sent no snapshot of range 2")
	}
	if !gate.frozenSurvived {
		t.Fatal("node 3's frozen range 3 was destroyed by a snapshot that never arrived; its range 2 has not merged")
	}
	if d := tc.stores[3].GetReplica(testRangeID).Desc(); string(d.GetEndKey()) != "k10" {
		t.Fatalf("node 3's range 2 spans [%q, %q) after a failed snapshot", d.GetStartKey(), d.GetEndKey())
	}

	waitFor(t, func() bool {
		l := tc.stores[3].GetReplica(testRangeID)
		return tc.stores[3].GetReplica(3) == nil && l != nil && len(l.Desc().GetEndKey()) == 0
	})
	tc.moveLease(3) // reads are then served by node 3
	for i := range 20 {
		if v, ok := tc.get(fmt.Sprintf("k%02d", i)); !ok || v != fmt.Sprintf("v%d", i) {
			t.Errorf("k%02d on node 3 after the merge: %q %v", i, v, ok)
		}
	}
	if v, ok := tc.get("m29"); !ok || v != "v" {
		t.Errorf("m29 on node 3 after the merge: %q %v", v, ok)
	}
}

// A crash between a merge (or a snapshot holding one) and the destruction
// of the frozen replica it took over leaves both on disk, the merged range
// covering the frozen one. The restarted node finishes the merge rather
// than keep a frozen replica over the merged range's keys.
func TestRestartFinishesMergeInterruptedByCrash(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.put("k15", "v")
	tc.splitAt(t, "k10", 3)
	frozen := tc.freezeEverywhere(t, 3, testRangeID)
	eng := tc.engines[1]
	lo, hi := keys.RangeLocalSpan(3)
	var saved [][2][]byte // range 3's state, log and votes as the crash leaves them
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		saved = append(saved, [2][]byte{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tc.leader(testRangeID).Merge(ctx, frozen); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return tc.stores[1].GetReplica(3) == nil })
	tc.crash(1)
	b := eng.NewBatch()
	_ = b.DeleteRange(lo, hi)
	for _, kv := range saved {
		_ = b.Set(kv[0], kv[1])
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()

	tc.restart(1)
	if tc.stores[1].GetReplica(3) != nil {
		t.Fatal("the frozen range 3 came back beside the range 2 that merged it")
	}
	if v, ok := tc.get("k15"); !ok || v != "v" {
		t.Fatalf("k15 after the restart: %q %v", v, ok)
	}
}
