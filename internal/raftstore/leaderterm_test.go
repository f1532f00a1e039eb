package raftstore

import (
	"testing"
	"time"
)

// TestLeaderTermFollowsTheLease: load samples are attributed by LeaderTerm,
// so only the leaseholder has one, and a lease transfer gives the new
// holder a newer term and the old one none.
func TestLeaderTermFollowsTheLease(t *testing.T) {
	tc := newTestCluster(t, 3)
	old := tc.leader(testRangeID)
	term := old.LeaderTerm()
	if term == 0 {
		t.Fatal("leaseholder has no leader term")
	}
	for _, id := range tc.nodes {
		if r := tc.stores[id].GetReplica(testRangeID); r != old && r.LeaderTerm() != 0 {
			t.Fatalf("follower on node %d has leader term %d", id, r.LeaderTerm())
		}
	}
	target := tc.nodes[0]
	if target == old.store.NodeID() {
		target = tc.nodes[1]
	}
	if err := old.TransferLease(target); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := tc.stores[target].GetReplica(testRangeID)
		if r.IsLeader() && old.LeaderTerm() == 0 {
			if r.LeaderTerm() <= term {
				t.Fatalf("new leaseholder's term %d, not after the old lease's %d", r.LeaderTerm(), term)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease never moved: node %d leader=%v term %d, old term %d", target, r.IsLeader(), r.LeaderTerm(), old.LeaderTerm())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
