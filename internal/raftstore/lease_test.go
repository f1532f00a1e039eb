package raftstore

import (
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// An answer that arrives late (held in a socket or a paused process) must
// not renew the lease: the lease counts from when the acknowledged
// heartbeat was sent.
func TestLateHeartbeatAnswerDoesNotRenewLease(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v")
	ld := tc.leader(testRangeID)
	leaderNode := ld.store.nodeID
	waitFor(t, ld.leaseCovers)
	// Answers from both followers stop reaching the leader; heartbeats still go out.
	var followers []uint64
	for _, id := range tc.nodes {
		if id != leaderNode {
			followers = append(followers, id)
			tc.net.SetCut(id, leaderNode, true)
		}
	}
	waitFor(t, func() bool { return !ld.leaseCovers() })
	time.Sleep(time.Duration(tc.cfg.ElectionTicks) * tc.cfg.TickInterval)
	st := ld.Status()
	if !st.Leader {
		t.Skip("leader stepped down before the late answers arrived")
	}
	// The late answers, one per follower, from the current term.
	for _, f := range followers {
		var from uint64
		for _, rd := range st.Desc.GetReplicas() {
			if rd.GetNodeId() == f {
				from = rd.GetReplicaId()
			}
		}
		ld.store.HandleRaftMessage(&tidekvpb.RaftMessage{RangeId: testRangeID, FromNodeId: f, ToNodeId: leaderNode,
			Message: &raftpb.Message{Type: raftpb.MsgHeartbeatResp.Enum(), From: new(from), To: new(st.ReplicaID), Term: new(st.Term)}})
	}
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if ld.leaseCovers() {
			t.Fatal("a late heartbeat answer renewed the lease")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A lease measures time on its leaseholder's clock alone (heartbeat send
// times to now), so an offset of the clock, even an hour, neither keeps the
// leaseholder from renewing its lease nor keeps the lease alive once the
// answers stop. (A backward step of the clock while answers are missing
// would stretch a lease by the step: see Clock.)
func TestLeaseUnderClockOffset(t *testing.T) {
	clock := &SkewClock{}
	tc := newTestCluster(t, 3, func(c *Config) { c.Clock = clock })
	tc.put("k", "v")
	ld := tc.leader(testRangeID)
	waitFor(t, ld.leaseCovers)
	clock.Set(time.Hour)
	if skew := time.Until(ld.store.Now()); skew < 59*time.Minute {
		t.Fatalf("the store's clock is %v ahead, want an hour", skew)
	}
	waitFor(t, ld.leaseCovers)
	tc.put("k", "v2")
	if v, ok := tc.get("k"); !ok || v != "v2" {
		t.Fatalf("read %q, %v under the offset, want v2", v, ok)
	}
	ld = tc.leader(testRangeID)
	waitFor(t, ld.leaseCovers)
	for _, id := range tc.nodes {
		if id != ld.store.nodeID {
			tc.net.SetCut(id, ld.store.nodeID, true)
		}
	}
	waitFor(t, func() bool { return !ld.leaseCovers() })
}
