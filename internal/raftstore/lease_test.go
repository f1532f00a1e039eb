package raftstore

import (
	"context"
	"errors"
	"sync"
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

// A lease measures time on its leaseholder's monotonic clock alone
// (heartbeat send times to now), so an offset of the wall clock, even an
// hour, neither keeps the leaseholder from renewing its lease nor keeps the
// lease alive once the answers stop.
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

// A backward step of the leaseholder's wall clock (an NTP step, a VM
// resume, an operator) must not revive a lapsed lease: a leader that lost
// its quorum would serve reads while the others elect a new leader.
func TestClockStepDoesNotReviveLease(t *testing.T) {
	clock := &SkewClock{}
	tc := newTestCluster(t, 3, func(c *Config) { c.Clock = clock })
	tc.put("k", "v")
	ld := tc.leader(testRangeID)
	waitFor(t, ld.leaseCovers)
	for _, id := range tc.nodes {
		if id != ld.store.nodeID {
			tc.net.SetCut(id, ld.store.nodeID, true)
		}
	}
	waitFor(t, func() bool { return !ld.leaseCovers() })
	clock.Set(-time.Hour)
	if !ld.IsLeader() {
		t.Skip("leader stepped down before its clock was stepped")
	}
	// The leader keeps recomputing its lease on every tick until it steps
	// down for want of a quorum; none of those may cover a read.
	end := time.Now().Add(2 * time.Duration(tc.cfg.ElectionTicks) * tc.cfg.TickInterval)
	for ld.IsLeader() && time.Now().Before(end) {
		if ld.leaseCovers() {
			t.Fatal("a backward step of the wall clock revived a lapsed lease")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// While a leaseholder hands its lease over it takes no proposals; a write
// then is told where the lease is going (NotLeaderError naming the
// transferee), not "overloaded": a client told it is overloaded may give
// up, as the Redis front end does.
func TestWriteDuringLeaseTransferNamesTheTransferee(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("a", "1")
	r := tc.leader(testRangeID)
	from := r.store.nodeID
	to := from%3 + 1
	// The transferee never hears it is to campaign, so the transfer stays
	// pending until Raft gives up on it (an election timeout).
	tc.net.SetCut(from, to, true)
	if err := r.TransferLease(to); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("a"), Value: []byte("2")}})
		cancel()
		var nl *NotLeaderError
		switch {
		case errors.As(err, &nl):
			if nl.LeaderNodeID != to {
				t.Fatalf("write during the transfer: %v, want the transferee node %d named", err, to)
			}
			return
		case errors.Is(err, ErrOverloaded):
			t.Fatalf("write during the transfer: %v, want NotLeaderError", err)
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("never saw a write refused while the lease was being transferred")
}

// heldTimeoutNow is a node's side of the network on which a MsgTimeoutNow
// for range rangeID, and everything sent after it on the same link, waits
// until release is closed: a slow link, in order.
type heldTimeoutNow struct {
	*Store
	rangeID uint64
	once    sync.Once
	held    chan struct{} // closed when a MsgTimeoutNow starts waiting
	release chan struct{}
}

func (h *heldTimeoutNow) HandleRaftMessage(m *tidekvpb.RaftMessage) {
	if m.GetRangeId() == h.rangeID && m.GetMessage().GetType() == raftpb.MsgTimeoutNow {
		h.once.Do(func() { close(h.held) })
		<-h.release
	}
	h.Store.HandleRaftMessage(m)
}

// Raft gives up a lease transfer whose transferee has not won within an
// election timeout, and the old leaseholder leads on. Its MsgTimeoutNow
// may still be on the way: the transferee then campaigns with a vote the
// followers grant in spite of the lease (a transfer's). The old
// leaseholder must hold no lease until that message can no longer arrive,
// or it serves reads the new leader's writes have made stale.
func TestAbortedTransferLateTimeoutNowNoStaleRead(t *testing.T) {
	// Long leases: the old leaseholder's would outlast the new leader's
	// election and first write by far.
	tc := newTestCluster(t, 3, func(c *Config) { c.ElectionTicks = 100 })
	tc.put("k", "old")
	tc.moveLease(1)
	a, b, c := tc.stores[1].GetReplica(testRangeID), tc.stores[2].GetReplica(testRangeID), uint64(3)
	waitFor(t, a.leaseCovers)
	gate := &heldTimeoutNow{Store: tc.stores[2], rangeID: testRangeID, held: make(chan struct{}), release: make(chan struct{})}
	tc.net.Register(2, gate)
	released := false
	defer func() {
		if !released {
			close(gate.release)
		}
	}()
	if err := a.TransferLease(2); err != nil {
		t.Fatal(err)
	}
	<-gate.held
	// Raft aborts the transfer; node 1 leads on and node 3 answers its
	// heartbeats.
	waitFor(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.mu.raw.BasicStatus().LeadTransferee == 0
	})
	aborted := monoNow()
	waitFor(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.mu.lastContact[c] > aborted
	})
	if !a.IsLeader() {
		t.Fatal("node 1 stepped down after the transfer was aborted")
	}
	if a.leaseValid() {
		t.Error("node 1 holds a lease while its MsgTimeoutNow to node 2 may still arrive")
	}

	// The message arrives; node 1 hears nothing more.
	tc.net.SetCut(2, 1, true)
	tc.net.SetCut(3, 1, true)
	close(gate.release)
	released = true
	waitFor(t, b.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer rcancel()
	if v, _, err := a.Get(rctx, []byte("k"), ReadOptions{}); err == nil && string(v) != "new" {
		t.Fatalf("node 1 read k = %q after node 2 took over and wrote \"new\" (lease still valid: %v)", v, a.leaseValid())
	}
}
