package raftstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/linearizability"
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

// restartAllVolatile crashes every node and brings each back with its
// range data gone, as a whole-cluster restart of a memory key space does.
func (tc *testCluster) restartAllVolatile() {
	tc.t.Helper()
	for _, id := range tc.nodes {
		tc.crash(id)
	}
	for _, id := range tc.nodes {
		tc.restartVolatile(id)
	}
}

// waitRepaired waits until node id's replica of the test range holds its
// data again (not lost) and is a voter, and returns it.
func (tc *testCluster) waitRepaired(id uint64) *Replica {
	tc.t.Helper()
	var r *Replica
	waitForWhy(tc.t, func() (bool, string) {
		r = tc.stores[id].GetReplica(testRangeID)
		if r != nil && r.Desc() != nil && !r.DataLost() && replicaOnNode(r.Desc(), id).GetType() == tidekvpb.ReplicaType_VOTER {
			return true, ""
		}
		found := fmt.Sprintf("node %d holds no replica", id)
		if r != nil {
			found = fmt.Sprintf("node %d's replica lost %v, desc %v", id, r.DataLost(), r.Desc())
		}
		for _, n := range tc.nodes {
			if o := tc.stores[n].GetReplica(testRangeID); o != nil && o.IsLeader() {
				found += fmt.Sprintf("; node %d leads, lost %v, desc %v", n, o.DataLost(), o.Desc())
			}
		}
		return false, found
	})
	return r
}

// readsOn checks that node id's replica answers an ANY read of each key
// with its value, once it has caught up.
func (tc *testCluster) readsOn(id uint64, want map[string]string) {
	tc.t.Helper()
	for k, v := range want {
		waitForWhy(tc.t, func() (bool, string) {
			r := tc.stores[id].GetReplica(testRangeID)
			if r == nil {
				return false, fmt.Sprintf("node %d holds no replica", id)
			}
			got, ok, err := r.Get(context.Background(), []byte(k), anyRead)
			if err == nil && ok && string(got) == v {
				return true, ""
			}
			st := r.Status()
			return false, fmt.Sprintf("node %d's replica %d (lost %v, applied %d) read %s: %q, found %v, %v; want %s",
				id, st.ReplicaID, r.DataLost(), st.Applied, k, got, ok, err, v)
		})
	}
}

func fill(tc *testCluster, n int) map[string]string {
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i)
		tc.put(k, v)
		want[k] = v
	}
	return want
}

func nonLeader(tc *testCluster) uint64 {
	for _, id := range tc.nodes {
		if id != tc.leader(testRangeID).store.nodeID {
			return id
		}
	}
	return 0
}

// A follower whose data went with a restart serves nothing as current:
// the leader replaces it with a fresh replica that a snapshot fills, into
// memory again, and no acknowledged write is lost.
func TestVolatileFollowerReplacedAfterRestart(t *testing.T) {
	tc := newTestCluster(t, 3)
	want := fill(tc, 20)
	victim := nonLeader(tc)
	tc.crash(victim)
	s := tc.restartVolatile(victim)
	if got := s.Stats().ReplicasLost.Load(); got != 1 {
		t.Fatalf("%d replicas lost at the restart, want 1", got)
	}
	tc.put("after", "restart")
	want["after"] = "restart"
	tc.waitRepaired(victim)
	tc.readsOn(victim, want)
	if _, ok, _ := tc.engines[victim].Get(dataKey("k05")); ok {
		t.Fatal("the refilled data is in the base engine, not in memory")
	}
	// Counted once the fresh replica is a voter.
	waitFor(t, func() bool { return tc.leader(testRangeID).store.Stats().LostReplicasReplaced.Load() == 1 })
}

// A lost replica that missed its own removal (its leader's messages did
// not reach it) is dropped when the range addresses the fresh replica
// that replaces it, instead of blocking that replica for good: there is no
// range directory here for the replica GC to consult.
func TestVolatileLostReplicaMissingItsRemovalIsReplaced(t *testing.T) {
	tc := newTestCluster(t, 3)
	want := fill(tc, 20)
	victim := nonLeader(tc)
	ld := tc.leader(testRangeID)
	old := replicaOnNode(ld.Desc(), victim).GetReplicaId()
	tc.crash(victim)
	tc.net.SetCut(ld.store.nodeID, victim, true) // it still reaches the leader
	tc.restartVolatile(victim)
	waitFor(t, func() bool {
		rd := replicaOnNode(ld.Desc(), victim)
		return rd != nil && rd.GetReplicaId() > old
	})
	if r := tc.stores[victim].GetReplica(testRangeID); r == nil || !r.DataLost() || r.Status().ReplicaID != old {
		t.Fatal("the lost replica learnt of its removal through the cut")
	}
	tc.net.SetCut(ld.store.nodeID, victim, false)
	tc.waitRepaired(victim)
	tc.readsOn(victim, want)
}

// A leader whose data went with a restart hands leadership to a voter
// that has it, which then replaces it.
func TestVolatileLeaderHandsOver(t *testing.T) {
	tc := newTestCluster(t, 3)
	want := fill(tc, 20)
	victim := tc.leader(testRangeID).store.nodeID
	tc.crash(victim)
	tc.restartVolatile(victim)
	tc.waitRepaired(victim)
	tc.readsOn(victim, want)
	for k, v := range want {
		if got, ok := tc.get(k); !ok || got != v {
			t.Fatalf("%s = %q, %v after the leader's restart, want %q", k, got, ok, v)
		}
	}
}

// Two of three voters restarted: the third still has every acknowledged
// write (it is needed for a quorum of the new leader's log), and both are
// repaired from it.
func TestVolatileTwoOfThreeRestarted(t *testing.T) {
	tc := newTestCluster(t, 3)
	want := fill(tc, 20)
	var victims []uint64
	for _, id := range tc.nodes {
		if len(victims) < 2 {
			victims = append(victims, id)
		}
	}
	for _, id := range victims {
		tc.crash(id)
	}
	for _, id := range victims {
		tc.restartVolatile(id)
	}
	for _, id := range tc.nodes {
		tc.waitRepaired(id)
		tc.readsOn(id, want)
	}
}

// Every voter restarted: no one has the data, so the range starts again
// empty, the same on every replica, and takes writes.
func TestVolatileWholeRangeRestartsEmpty(t *testing.T) {
	tc := newTestCluster(t, 3)
	fill(tc, 20)
	tc.restartAllVolatile()
	for _, id := range tc.nodes {
		tc.waitRepaired(id)
	}
	if _, ok := tc.get("k05"); ok {
		t.Fatal("a value lost with every voter's memory is still read")
	}
	tc.put("new", "value")
	for _, id := range tc.nodes {
		tc.readsOn(id, map[string]string{"new": "value"})
		r := tc.stores[id].GetReplica(testRangeID)
		if got, ok, err := r.Get(context.Background(), []byte("k05"), anyRead); err != nil || ok {
			t.Fatalf("node %d reads k05 = %q, %v, %v after the reset", id, got, ok, err)
		}
		if got := tc.stores[id].Stats().RangesReset.Load(); got != 1 {
			t.Fatalf("node %d reset the range %d times, want 1", id, got)
		}
	}
}

// A lost replica refuses reads and writes with DataLostError rather than
// answering from the data it no longer has.
func TestVolatileLostReplicaServesNothing(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.put("k", "v")
	r := tc.leader(testRangeID)
	r.lost.Store(true)
	var lost *DataLostError
	if _, _, err := r.Get(context.Background(), []byte("k"), anyRead); !errors.As(err, &lost) {
		t.Fatalf("read on a lost replica: %v", err)
	}
	if _, err := r.Write(context.Background(), []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("w")}}); !errors.As(err, &lost) {
		t.Fatalf("write on a lost replica: %v", err)
	}
}

// With no other voter, the replica starts again empty at once, and takes
// writes.
func TestVolatileSoleVoterStartsEmpty(t *testing.T) {
	tc := newTestCluster(t, 1)
	tc.put("k", "v")
	tc.crash(1)
	s := tc.restartVolatile(1)
	if got := s.Stats().ReplicasLost.Load(); got != 1 {
		t.Fatalf("%d replicas lost at the restart, want 1", got)
	}
	if _, ok := tc.get("k"); ok {
		t.Fatal("a value lost with the memory engine is still read")
	}
	tc.put("k2", "v2")
	if v, ok := tc.get("k2"); !ok || v != "v2" {
		t.Fatalf("k2 = %q, %v", v, ok)
	}
}

func TestDecideLost(t *testing.T) {
	voters := func(ids ...uint64) *tidekvpb.RangeDescriptor {
		d := &tidekvpb.RangeDescriptor{RangeId: testRangeID}
		for _, id := range ids {
			d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: id * 10, ReplicaId: id})
		}
		return d
	}
	learner := voters(1, 2, 3)
	learner.Replicas = append(learner.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: 40, ReplicaId: 4, Type: tidekvpb.ReplicaType_LEARNER})
	joint := voters(1, 2)
	joint.Replicas = append(joint.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: 30, ReplicaId: 3, Type: tidekvpb.ReplicaType_VOTER_INCOMING})
	for _, c := range []struct {
		name     string
		d        *tidekvpb.RangeDescriptor
		selfLost bool
		heard    map[uint64]bool
		kind     lostStepKind
		replica  uint64
	}{
		{"nothing lost", voters(1, 2, 3), false, map[uint64]bool{2: false, 3: false}, lostWait, 0},
		{"a follower lost", voters(1, 2, 3), false, map[uint64]bool{2: false, 3: true}, lostReplace, 3},
		{"a learner lost", learner, false, map[uint64]bool{4: true}, lostReplace, 4},
		{"not while joint", joint, false, map[uint64]bool{2: true}, lostWait, 0},
		{"lost leader, a voter has it", voters(1, 2, 3), true, map[uint64]bool{2: true, 3: false}, lostTransfer, 3},
		{"lost leader, one not heard", voters(1, 2, 3), true, map[uint64]bool{2: true}, lostWait, 0},
		{"every voter lost", voters(1, 2, 3), true, map[uint64]bool{2: true, 3: true}, lostReset, 0},
		{"every voter lost, a learner not", learner, true, map[uint64]bool{2: true, 3: true, 4: false}, lostReset, 0},
		{"sole voter", voters(1), true, nil, lostReset, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			step := decideLost(c.d, 1, c.selfLost, c.heard)
			if step.kind != c.kind || step.replica.GetReplicaId() != c.replica {
				t.Fatalf("got %v on replica %d (%s), want %v on %d", step.kind, step.replica.GetReplicaId(), step.reason, c.kind, c.replica)
			}
			if step.kind != lostWait && step.reason == "" {
				t.Fatal("a step without a reason")
			}
		})
	}
}

// TestLinearizabilityVolatileRestarts: with concurrent clients on the
// leaseholder, a nemesis crashes a node (the leader or a follower, in
// turn) and brings it back with its range data gone, waiting for the
// range to repair it before the next crash; the history must be
// linearizable: no acknowledged write lost, no read of lost data.
func TestLinearizabilityVolatileRestarts(t *testing.T) {
	dur := linearizability.NemesisDuration(t, 6*time.Second)
	lc := newLinzCluster(t, 3)
	lc.waitLeader(t)
	// Keys the workload never writes: with 4 keys under constant writes a
	// replica serving an emptied state would soon look current again.
	cold := fill(lc.tc, 10)
	w := newLinzWorkload(t)
	stop := w.run(t, 6, routeToLeader(lc))
	time.Sleep(300 * time.Millisecond) // a fault-free start
	deadline := time.Now().Add(dur)
	for round := 0; time.Now().Before(deadline); round++ {
		leader := lc.waitLeader(t)
		victim, kind := leader, "leader"
		if round%2 == 1 {
			victim, kind = lc.others(leader)[w.rng.IntN(2)], "follower"
		}
		w.stats.Mark(fmt.Sprintf("crash node %d (%s), data lost", victim, kind))
		lc.crash(victim)
		time.Sleep(100*time.Millisecond + time.Duration(w.rng.Int64N(int64(200*time.Millisecond))))
		lc.restartVolatile(victim)
		// Only the nemesis changes the stores, so reading them unlocked
		// is safe, and clients keep going during the repair.
		for _, id := range lc.tc.nodes {
			lc.tc.waitRepaired(id)
			lc.tc.readsOn(id, cold)
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.finish(t, stop, time.Now(), "")
}
