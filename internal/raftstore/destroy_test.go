package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// A write pending when its replica goes (removed by a replica change, or
// merged away) may still be committed by the other replicas, so its
// proposer answers ErrAmbiguous. RangeNotFound would tell routing that the
// write was not done here and should go to the range's new home, which
// then runs it a second time: a one-phase commit found its own write as a
// changed read and the transaction ran again (TestBankUnderFaults).
func TestWritePendingAtDestroyIsAmbiguous(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v")
	r := tc.leader(testRangeID)
	// The leader cut off, so that the write stays pending.
	tc.net.Isolate(r.store.nodeID, tc.nodes, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("w")}})
		errc <- err
	}()
	waitFor(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.mu.proposals) > 0
	})
	r.mu.Lock()
	r.store.destroyReplicaLocked(r, "a test removes it")
	r.mu.Unlock()
	if err := <-errc; !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("a write pending when its replica went: %v, want ErrAmbiguous", err)
	}
}
