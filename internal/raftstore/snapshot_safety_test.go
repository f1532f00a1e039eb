package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/storage"
	"go.etcd.io/raft/v3"
)

// heldSnapshots passes a node's traffic through, except that the data of
// snapshots of one range stops after the store has checked and accepted
// the snapshot's header, until release is closed: a slow transfer.
type heldSnapshots struct {
	*Store
	rangeID uint64
	started chan struct{} // closed once a held transfer is under way
	once    sync.Once
	release chan struct{}
}

func (h *heldSnapshots) HandleSnapshot(header *tidekvpb.RaftMessage, data io.Reader) error {
	if header.GetRangeId() != h.rangeID {
		return h.Store.HandleSnapshot(header, data)
	}
	return h.Store.HandleSnapshot(header, &gatedReader{h: h, r: data})
}

type gatedReader struct {
	h *heldSnapshots
	r io.Reader
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.h.once.Do(func() { close(g.h.started) })
	<-g.h.release
	return g.r.Read(p)
}

// A snapshot checked against the node's replicas when it arrived may be
// applied after another range took part of its span here: a new learner's
// snapshot of range 2 is slow; meanwhile range 2 splits, the new range 3
// (born with the learner) sends its own small snapshot, which finds no
// initialized replica in its way and is applied, and writes go to range
// 3. Applying range 2's older snapshot then would clear range 3's span and
// put range 2's old data there (and replaying the split would overwrite
// range 3's saved state): range 3's replica on the node would hold stale
// data under a current applied index. The snapshot is dropped instead,
// and the node's range 2 is initialized by a later one.
func TestSnapshotDroppedWhenItsSpanWasTakenMeanwhile(t *testing.T) {
	tc := newTestCluster(t, 3)
	for i := range 100 {
		tc.put(fmt.Sprintf("k%02d", i), "old")
	}
	n4 := tc.addNode()
	held := &heldSnapshots{Store: tc.stores[n4], rangeID: testRangeID, started: make(chan struct{}), release: make(chan struct{})}
	tc.net.Register(n4, held)
	release := releaser(t, held.release)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ldr := tc.leader(testRangeID)
	if _, _, err := ldr.addLearnerStep(ctx, ldr.Desc(), n4, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.started:
	case <-ctx.Done():
		t.Fatal("no snapshot of range 2 reached node 4")
	}
	const rhs = 3
	if _, err := ldr.Split(ctx, []byte("k50"), rhs); err != nil {
		t.Fatal(err)
	}
	right := func() *Replica { return tc.stores[n4].GetReplica(rhs) }
	waitFor(t, func() bool { r := right(); return r != nil && r.desc.Load() != nil })

	// Range 3's newer writes, then range 2's old snapshot arrives.
	rl := tc.leader(rhs)
	for i := 50; i < 100; i++ {
		if _, err := rl.Write(ctx, []*tidekvpb.WriteOp{
			{Key: fmt.Appendf(nil, "k%02d", i), Value: []byte("new value")},
			{Key: fmt.Appendf(nil, "k%02d+", i), Value: []byte("added")},
		}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	left := func() *Replica { return tc.stores[n4].GetReplica(testRangeID) }
	waitFor(t, func() bool { r := left(); return r != nil && r.desc.Load() != nil })
	if d := left().Desc(); string(d.GetEndKey()) != "k50" {
		t.Errorf("node 4's range 2 spans [%q, %q), want it to end at the split", d.GetStartKey(), d.GetEndKey())
	}

	// Node 4's range 3 holds what its leader holds, once caught up.
	if _, err := rl.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k99z"), Value: []byte("last")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return right().applied.Load() >= rl.applied.Load() })
	want, err := rl.DataSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := right().DataSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("node 4's range 3 holds %+v; its leader %+v", got, want)
	}
}

// stuckIngest is an engine whose snapshot ingestion never returns: the
// node is killed there, after applySnapshotLocked cleared the old data and
// before it wrote the state that claims the new.
type stuckIngest struct {
	*storage.MemEngine
	entered chan struct{}
}

func (e *stuckIngest) IngestSST(path string, lo, hi []byte) error {
	close(e.entered)
	select {}
}

// moveLease transfers range 2's lease to node target.
func (tc *testCluster) moveLease(target uint64) {
	tc.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if old := tc.leader(testRangeID); old.store.NodeID() != target {
			_ = old.TransferLease(target)
		} else {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tc.t.Fatalf("the lease never reached node %d", target)
}

// A node killed while a snapshot replaces its replica's data comes back
// with the old applied index and log over cleared data. A leader whose log
// still reaches back far enough appends to it instead of sending the
// snapshot again, and it would serve without what it had applied. It must
// come back lost instead (serving nothing) and be replaced, and then hold
// every acknowledged write.
func TestKilledInSnapshotApplyComesBackLost(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.LogKeepEntries = 5 })
	tc.crash(2) // node 2 keeps its whole log, so it can catch node 3 up
	tc.cfg.LogKeepEntries = 100_000
	tc.restart(2)
	tc.cfg.LogKeepEntries = 5
	tc.moveLease(1)
	for i := range 10 {
		tc.put(fmt.Sprintf("a%02d", i), "v")
	}
	waitFor(t, func() bool { _, ok, _ := tc.engines[3].Get(dataKey("a09")); return ok })
	tc.crash(3)
	for i := range 60 { // node 1 truncates its log past node 3's
		tc.put(fmt.Sprintf("b%02d", i), "v")
	}
	stuck := &stuckIngest{MemEngine: tc.engines[3], entered: make(chan struct{})}
	tc.startStoreOn(3, stuck)
	select {
	case <-stuck.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("node 3 was sent no snapshot")
	}
	// Killed there: its store is abandoned, its engine keeps what was
	// committed.
	tc.net.Unregister(3)
	delete(tc.stores, 3)
	tc.engines[3] = tc.engines[3].CrashCloneKeeping(1 << 30)
	tc.moveLease(2)
	tc.restart(3)
	if r := tc.stores[3].GetReplica(testRangeID); r == nil || !r.DataLost() {
		t.Error("node 3's replica came back serving after a stop in the middle of a snapshot")
	}
	tc.put("c00", "v")
	r3 := tc.waitRepaired(3)
	waitFor(t, func() bool { _, ok, _ := tc.engines[3].Get(dataKey("c00")); return ok })
	for i := range 10 {
		k := fmt.Sprintf("a%02d", i)
		if _, ok, _ := tc.engines[3].Get(dataKey(k)); !ok {
			t.Errorf("acknowledged %s missing on node 3 (applied index %d)", k, r3.applied.Load())
		}
	}
}

// Raft may ask for a snapshot in the middle of an apply (a replica
// change's ApplyConfChange sends appends, or a snapshot to a follower that
// needs one). The applied index then counts entries whose writes are still
// in the uncommitted apply batch, which an engine snapshot does not hold:
// a follower given it would miss them for good. Raft is told to ask later.
func TestNoSnapshotInTheMiddleOfAnApply(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.put("a", "v")
	r := tc.leader(testRangeID)
	r.mu.Lock()
	defer r.mu.Unlock()
	snap, err := r.snapshotLocked()
	if err != nil {
		t.Fatalf("between applies: %v", err)
	}
	idx := snap.GetMetadata().GetIndex()
	r.mu.outgoingSnaps[idx].Close()
	delete(r.mu.outgoingSnaps, idx)
	r.mu.state.AppliedIndex++ // as applyCommittedLocked leaves it until the batch is written
	_, err = r.snapshotLocked()
	r.mu.state.AppliedIndex--
	if !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) {
		t.Fatalf("in the middle of an apply: %v, want %v", err, raft.ErrSnapshotTemporarilyUnavailable)
	}
}
