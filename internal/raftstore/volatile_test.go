package raftstore

import (
	"fmt"
	"testing"

	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/memengine"
	routedeng "github.com/tidekv/tidekv/internal/storage/routed"
)

// restartVolatile restarts crashed node id on its engine with the range's
// user data routed to a fresh memory engine: what a node whose data was in
// memory finds after a restart.
func (tc *testCluster) restartVolatile(id uint64) *Store {
	tc.t.Helper()
	mem, err := memengine.New(memengine.DefaultConfig())
	if err != nil {
		tc.t.Fatal(err)
	}
	var spans []routedeng.Span
	for _, s := range UserDataSpans(nil, nil) {
		spans = append(spans, routedeng.Span{Lo: s[0], Hi: s[1]})
	}
	eng := routedeng.New(tc.engines[id], spans...)
	if err := eng.ReopenPart(mem, spans...); err != nil {
		tc.t.Fatal(err)
	}
	return tc.startStoreOn(id, eng)
}

// A follower whose data was lost with a restart drops its replica (the
// term one higher, no vote) instead of serving nothing as current; the
// leader it deposes is replaced and the new one refills it by snapshot.
func TestVolatileReplicaRefilledAfterRestart(t *testing.T) {
	tc := newTestCluster(t, 3)
	for i := range 20 {
		tc.put(fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i))
	}
	var victim uint64
	for _, id := range tc.nodes {
		if id != tc.leader(testRangeID).store.nodeID {
			victim = id
		}
	}
	hs, err := loadHardState(tc.engines[victim], testRangeID)
	if err != nil {
		t.Fatal(err)
	}
	tc.crash(victim)
	s := tc.restartVolatile(victim)
	if got := s.Stats().ReplicasRefilled.Load(); got != 1 {
		t.Fatalf("%d replicas dropped to refill, want 1", got)
	}
	if after, _ := loadHardState(tc.engines[victim], testRangeID); after.GetTerm() != hs.GetTerm()+1 || after.GetVote() != 0 {
		t.Fatalf("hard state at the restart %v, was %v: want the next term and no vote", after, hs)
	}
	tc.put("after", "restart")
	waitFor(t, func() bool {
		r := s.GetReplica(testRangeID)
		return r != nil && r.Desc() != nil && !r.awaitingRefill.Load()
	})
	for _, k := range []string{"k05", "k19", "after"} {
		waitFor(t, func() bool { _, ok, _ := s.eng.Get(dataKey(k)); return ok })
	}
	if _, ok, _ := tc.engines[victim].Get(dataKey("k05")); ok {
		t.Fatal("the refilled data is in the base engine, not in memory")
	}
	if _, ok, _ := tc.engines[victim].Get(keys.RefillKey(testRangeID)); ok {
		t.Fatal("the refill mark outlived the snapshot")
	}
}

// With no other voter to refill from, the replica starts again empty at
// the index it had applied, and takes writes.
func TestVolatileSoleVoterStartsEmpty(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.put("k", "v")
	tc.crash(1)
	s := tc.restartVolatile(1)
	if got := s.Stats().ReplicasRefilled.Load(); got != 0 {
		t.Fatalf("%d replicas dropped with no voter to refill them", got)
	}
	if _, ok := tc.get("k"); ok {
		t.Fatal("a value lost with the memory engine is still read")
	}
	tc.put("k2", "v2")
	if v, ok := tc.get("k2"); !ok || v != "v2" {
		t.Fatalf("k2 = %q, %v", v, ok)
	}
}
