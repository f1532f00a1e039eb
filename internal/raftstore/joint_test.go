package raftstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// jointRun is a replica move stopped in its joint configuration: node
// added replaces node removed in one joint change, which leader entered.
type jointRun struct {
	tc                     *testCluster
	leader, added, removed uint64
	transferee             uint64 // the voter in both configurations besides the leader
	changeErr              chan error
}

// startJointMove writes 20 keys, then moves range 2's replica from a
// follower to a new fourth node and runs act on the leader the moment it
// has applied the joint configuration, before Raft proposes leaving it
// (Config.testingEnteredJoint). It returns once act has run.
func startJointMove(t *testing.T, act func(j *jointRun, r *Replica)) *jointRun {
	t.Helper()
	j := &jointRun{changeErr: make(chan error, 1)}
	entered := make(chan struct{})
	var once sync.Once
	j.tc = newTestCluster(t, 3, func(c *Config) {
		c.testingEnteredJoint = func(r *Replica) {
			once.Do(func() { act(j, r); close(entered) })
		}
	})
	for i := range 20 {
		j.tc.put(fmt.Sprintf("k%02d", i), fmt.Sprint(i))
	}
	j.added = j.tc.addNode()
	ld := j.tc.leader(testRangeID)
	j.leader = ld.store.nodeID
	for _, id := range []uint64{1, 2, 3} {
		if id == j.leader {
			continue
		}
		if j.removed == 0 {
			j.removed = id
		} else {
			j.transferee = id
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	go func() {
		_, err := ld.ChangeReplicas(ctx, j.added, j.removed)
		j.changeErr <- err
	}()
	t.Cleanup(func() { cancel(); <-j.changeErr })
	select {
	case <-entered:
	case err := <-j.changeErr:
		t.Fatalf("the move ended before entering a joint configuration: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the move never entered a joint configuration")
	}
	return j
}

// checkMoveFinished asserts what must hold after the window: every running
// replica of range 2 has left the joint configuration, forwards (a joint
// configuration that a leader applied is committed, so the move cannot be
// undone: the added node is a voter and the removed one is gone), the range
// has a leader that takes writes, and every acknowledged write reads back.
func (j *jointRun) checkMoveFinished(t *testing.T) {
	t.Helper()
	tc := j.tc
	waitForWhy(t, func() (bool, string) {
		var descs []string
		for _, id := range tc.nodes {
			s := tc.stores[id]
			if s == nil || id == j.removed {
				// The removed replica may miss the entry leaving the
				// joint configuration (it is no longer sent the log);
				// the replica GC removes it against the directory.
				continue
			}
			r := s.GetReplica(testRangeID)
			if r == nil {
				return false, fmt.Sprintf("n%d holds no replica", id)
			}
			d := r.Desc()
			descs = append(descs, fmt.Sprintf("n%d: %s", id, FormatReplicas(d)))
			a := replicaOnNode(d, j.added)
			if isJoint(d) || replicaOnNode(d, j.removed) != nil || a == nil || a.GetType() != tidekvpb.ReplicaType_VOTER || countVoters(d) != 3 {
				return false, fmt.Sprint(descs)
			}
		}
		return true, ""
	})
	tc.put("after", "move")
	for i := range 20 {
		if v, ok := tc.get(fmt.Sprintf("k%02d", i)); !ok || v != fmt.Sprint(i) {
			t.Fatalf("k%02d = %q, %v after the move", i, v, ok)
		}
	}
	if v, ok := tc.get("after"); !ok || v != "move" {
		t.Fatalf("after = %q, %v", v, ok)
	}
}

// The leader dies right after entering the joint configuration: it is cut
// off before it can send the proposal to leave, then stopped. The others
// elect a leader (a quorum of both configurations is up), which leaves the
// joint configuration; the old leader comes back and follows.
func TestLeaderKilledInJointConfiguration(t *testing.T) {
	j := startJointMove(t, func(j *jointRun, r *Replica) {
		j.tc.net.Isolate(r.store.nodeID, j.tc.nodes, true)
	})
	tc := j.tc
	tc.crash(j.leader)
	j.checkMoveFinished(t)
	tc.net.Isolate(j.leader, tc.nodes, false)
	tc.restart(j.leader)
	tc.put("back", "again")
	waitFor(t, func() bool {
		v, ok, _ := tc.engines[j.leader].Get(dataKey("back"))
		r := tc.stores[j.leader].GetReplica(testRangeID)
		return ok && string(v) == "again" && r != nil && !isJoint(r.Desc())
	})
}

// The lease moves to another voter right after the leader entered the
// joint configuration: the leadership transfer starts before Raft proposes
// leaving it (so the old leader's proposal to leave is dropped, as Raft
// drops proposals during a transfer), and the new leader must leave it.
func TestLeaseMovedInJointConfiguration(t *testing.T) {
	j := startJointMove(t, func(j *jointRun, r *Replica) {
		// Raft refuses to campaign with a configuration change committed
		// but not applied, which would abort the transfer: first the
		// transferee applies the joint configuration too. The leader sent
		// it the commit before applying (ready.go), so it gets there while
		// the leader waits here.
		tr := j.tc.stores[j.transferee].GetReplica(testRangeID)
		for deadline := time.Now().Add(10 * time.Second); !isJoint(tr.Desc()); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("the transferee did not apply the joint configuration")
				return
			}
		}
		for _, rd := range r.mu.state.GetDesc().GetReplicas() {
			if rd.GetNodeId() == j.transferee {
				r.transferLeaderLocked(rd.GetReplicaId())
			}
		}
	})
	waitFor(t, func() bool {
		r := j.tc.stores[j.transferee].GetReplica(testRangeID)
		return r != nil && r.IsLeader()
	})
	j.checkMoveFinished(t)
}
