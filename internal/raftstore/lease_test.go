package raftstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

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
	tc.followClockSteps()
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
	tc.followClockSteps()
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

// stallingSender holds one heartbeat to a peer inside Send, as a process
// paused between taking a message's time and handing it over would, and
// drops the peer's later heartbeats so that the held one is the last the
// peer answers.
type stallingSender struct {
	Transport
	mu      sync.Mutex
	to      uint64 // node whose next heartbeat stalls; 0 when disarmed
	stalled bool
	entered monoTime // when the stalled heartbeat reached Send
	handed  bool     // the stalled heartbeat went on to the network
}

func (s *stallingSender) Send(m *tidekvpb.RaftMessage) bool {
	if m.GetMessage().GetType() != raftpb.MsgHeartbeat {
		return s.Transport.Send(m)
	}
	s.mu.Lock()
	armed, stalled := s.to != 0 && m.GetToNodeId() == s.to, s.stalled
	if armed && !stalled {
		s.stalled, s.entered = true, monoNow()
	}
	s.mu.Unlock()
	switch {
	case armed && stalled:
		return false
	case armed:
		time.Sleep(30 * time.Millisecond)
		defer func() { s.mu.Lock(); s.handed = true; s.mu.Unlock() }()
	}
	return s.Transport.Send(m)
}

// A heartbeat counts from before it was handed to the transport: a pause
// between the handing over and the reading of the clock would credit the
// peer's answer with contact it did not have then, and stretch the lease.
func TestHeartbeatContactCountsFromBeforeTheSend(t *testing.T) {
	tc := newTestCluster(t, 3)
	senders := map[uint64]*stallingSender{}
	tc.wrap = func(node uint64, tr Transport) Transport {
		senders[node] = &stallingSender{Transport: tr}
		return senders[node]
	}
	for _, id := range tc.nodes {
		tc.crash(id)
		tc.restart(id)
	}
	ld := tc.leader(testRangeID)
	waitFor(t, ld.leaseCovers)
	var peer, peerReplica uint64
	for _, rd := range ld.Status().Desc.GetReplicas() {
		if rd.GetNodeId() != ld.store.nodeID {
			peer, peerReplica = rd.GetNodeId(), rd.GetReplicaId()
		}
	}
	snd := senders[ld.store.nodeID]
	snd.mu.Lock()
	snd.to = peer
	snd.mu.Unlock()
	// Once the stalled heartbeat is answered no other is outstanding (its
	// sender holds the replica's lock from Send until it queued the time).
	waitFor(t, func() bool {
		snd.mu.Lock()
		handed := snd.handed
		snd.mu.Unlock()
		ld.mu.Lock()
		defer ld.mu.Unlock()
		return handed && len(ld.mu.heartbeatsSent[peerReplica]) == 0
	})
	ld.mu.Lock()
	contact := ld.mu.lastContact[peerReplica]
	ld.mu.Unlock()
	if contact > snd.entered {
		t.Fatalf("peer credited with contact at %v, %v after its heartbeat reached the transport",
			contact, time.Duration(contact-snd.entered))
	}
}

// A follower that heard the leader grants no vote to another candidate
// until half an election timeout after the lease that contact gave ends
// (what leaseLowWater and ValidateMaxClockOffset count on), measured on
// Raft itself: a follower's first tick may come just after the heartbeat,
// so k ticks can take as little as k−1 tick intervals.
func TestLeaseEndsHalfAnElectionTimeoutBeforeAVote(t *testing.T) {
	cfg := DefaultConfig()
	follower, ms, _ := threeVoterRawNode(t, &cfg, 2)
	drain := func() (msgs []*raftpb.Message) {
		// As the store does with AsyncStorageWrites: storage messages
		// are done at once, their responses stepped or sent.
		for follower.HasReady() {
			for _, m := range follower.Ready().Messages {
				if to := m.GetTo(); to != raft.LocalAppendThread && to != raft.LocalApplyThread {
					msgs = append(msgs, m)
					continue
				}
				if hs := appendHardState(m); hs != nil {
					_ = ms.SetHardState(hs)
				}
				for _, resp := range m.GetResponses() {
					if resp.GetTo() == 2 {
						_ = follower.Step(resp)
					} else {
						msgs = append(msgs, resp)
					}
				}
			}
		}
		return msgs
	}
	term := uint64(initialTerm + 1)
	if err := follower.Step(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(1), To: proto.Uint64(2),
		Term: proto.Uint64(term)}); err != nil {
		t.Fatal(err)
	}
	drain()
	for ticks := 1; ticks <= 3*cfg.ElectionTicks; ticks++ {
		follower.Tick()
		drain()
		if err := follower.Step(&raftpb.Message{Type: raftpb.MsgPreVote.Enum(), From: proto.Uint64(3), To: proto.Uint64(2),
			Term: proto.Uint64(term + 1), LogTerm: proto.Uint64(initialTerm), Index: proto.Uint64(initialIndex)}); err != nil {
			t.Fatal(err)
		}
		for _, m := range drain() {
			if m.GetType() != raftpb.MsgPreVoteResp || m.GetReject() {
				continue
			}
			earliestVote := time.Duration(ticks-1) * cfg.TickInterval
			if cfg.leaseDuration()+cfg.electionTimeout()/2 > earliestVote {
				t.Fatalf("a vote may be granted %v after the contact, but the lease (%v) and half an election timeout (%v) reach past it",
					earliestVote, cfg.leaseDuration(), cfg.electionTimeout()/2)
			}
			return
		}
	}
	t.Fatal("the follower never granted a vote")
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
	release := releaser(t, gate.release)
	// Until node 2 leads, no election but its own on the late message:
	// node 2, hearing nothing while the message waits, would otherwise
	// time out and pre-campaign (a pre-candidate ignores MsgTimeoutNow),
	// and node 3, once node 1 stops leading, would be elected in the
	// ordinary way.
	tc.holdTicks(true, 2, c)
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
	release()
	// Node 2 campaigns on the late message and wins with node 3's vote.
	waitFor(t, b.IsLeader)
	tc.holdTicks(false, 2, c)
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
