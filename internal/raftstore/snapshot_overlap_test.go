package raftstore

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
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
	released := false
	defer func() {
		if !released {
			close(held.release)
		}
	}()

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
	close(held.release)
	released = true
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
	wantBytes, wantKeys, err := rl.LiveSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotBytes, gotKeys, err := right().LiveSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gotBytes != wantBytes || gotKeys != wantKeys {
		t.Errorf("node 4's range 3 holds %d keys, %d bytes; its leader %d keys, %d bytes", gotKeys, gotBytes, wantKeys, wantBytes)
	}
}
