package raftstore

import (
	"context"
	"testing"
	"time"
)

func TestScratchSplitCollide(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("a", "1")
	tc.put("z", "1")
	ld := tc.leader(testRangeID)
	if _, err := ld.Split(context.Background(), []byte("m"), 3); err != nil {
		t.Fatal(err)
	}
	r3 := tc.leader(3)
	resp, err := r3.Split(context.Background(), []byte("t"), 2)
	t.Logf("split r3 at t with id 2: %v %v", resp, err)
	time.Sleep(200 * time.Millisecond)
	for _, id := range tc.nodes {
		for _, r := range tc.stores[id].Replicas() {
			t.Logf("n%d r%d %s", id, r.RangeID(), fmtDesc(r.Desc()))
		}
		t.Logf("n%d lookup z: %v", id, tc.stores[id].LookupKey([]byte("z")))
	}
	// restart a node
	tc.crash(2)
	tc.restart(2)
	for _, r := range tc.stores[2].Replicas() {
		t.Logf("after restart n2 r%d %s", r.RangeID(), fmtDesc(r.Desc()))
	}
}
