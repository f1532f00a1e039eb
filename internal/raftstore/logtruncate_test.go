package raftstore

import (
	"fmt"
	"maps"
	"testing"
)

// heldApplied is how many applied entries r's in-memory log holds.
func heldApplied(t *testing.T, r *Replica) uint64 {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	first, err := r.mu.storage.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	return r.mu.state.GetAppliedIndex() + 1 - first
}

// A range whose only replica has applied its writes keeps no more than a
// truncation batch of them in memory, however far below 2×LogKeepEntries
// its writes stay: a node with a thousand such ranges otherwise held every
// entry it ever wrote.
func TestSingleReplicaLogBounded(t *testing.T) {
	tc := newTestCluster(t, 1)
	const writes = 500 // well below 2×LogKeepEntries (4,000)
	for i := range writes {
		tc.put(fmt.Sprintf("k%04d", i), fmt.Sprint(i))
	}
	if n := heldApplied(t, tc.leader(testRangeID)); n >= logTruncateBatch {
		t.Errorf("after %d writes the replica holds %d applied log entries in memory, want fewer than %d", writes, n, logTruncateBatch)
	}
}

// logIndexes is r's truncated, applied and last log index.
func logIndexes(t *testing.T, r *Replica) (truncated, applied, last uint64) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	last, err := r.mu.storage.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	return r.mu.state.GetTruncatedIndex(), r.mu.state.GetAppliedIndex(), last
}

// waitLogsBounded waits until every running replica of the test range,
// followers as well as the leader, has applied what the leader had when
// the wait began and holds fewer than a truncation batch of applied
// entries in memory. A follower that has not applied the writes yet holds
// few of them without truncating anything: on a loaded machine one passed
// the wait so and failed the check of its truncation after it.
func (tc *testCluster) waitLogsBounded() {
	tc.t.Helper()
	_, caughtUp, _ := logIndexes(tc.t, tc.leader(testRangeID))
	waitForWhy(tc.t, func() (bool, string) {
		for _, id := range tc.nodes {
			s := tc.stores[id]
			if s == nil {
				continue
			}
			r := s.GetReplica(testRangeID)
			if _, applied, _ := logIndexes(tc.t, r); applied < caughtUp {
				return false, fmt.Sprintf("node %d (leader %v) applied %d, the leader %d", id, r.IsLeader(), applied, caughtUp)
			}
			if n := heldApplied(tc.t, r); n >= logTruncateBatch {
				return false, fmt.Sprintf("node %d (leader %v) holds %d applied entries, want fewer than %d", id, r.IsLeader(), n, logTruncateBatch)
			}
		}
		return true, ""
	})
}

// followers names the two nodes of a three-node test cluster that do not
// hold ld.
func (tc *testCluster) followers(ld *Replica) (a, b uint64) {
	for _, id := range tc.nodes {
		switch {
		case id == ld.store.nodeID:
		case a == 0:
			a = id
		default:
			b = id
		}
	}
	return a, b
}

func writeRange(tc *testCluster, from, to int) map[string]string {
	kvs := map[string]string{}
	for i := from; i < to; i++ {
		k := fmt.Sprintf("k%04d", i)
		tc.put(k, fmt.Sprint(i))
		kvs[k] = fmt.Sprint(i)
	}
	return kvs
}

// Followers truncate as their leader does, to what it says every replica
// holds: with three replicas a range's followers otherwise kept every
// entry until they held 2×LogKeepEntries (4,000 on each follower of each
// range of a node with many small ranges). A follower restarted from its
// truncated log catches up from the leader's log, no snapshot needed, and
// goes on truncating.
func TestFollowerLogBounded(t *testing.T) {
	tc := newTestCluster(t, 3)
	kvs := writeRange(tc, 0, 500) // well below 2×LogKeepEntries (4,000)
	tc.waitLogsBounded()
	f, _ := tc.followers(tc.leader(testRangeID))
	if tr, _, _ := logIndexes(t, tc.stores[f].GetReplica(testRangeID)); tr <= initialIndex {
		t.Fatalf("follower on node %d truncated nothing (truncated index %d)", f, tr)
	}
	tc.crash(f)
	tc.restart(f)
	maps.Copy(kvs, writeRange(tc, 500, 700))
	tc.waitReplicated(kvs)
	tc.waitLogsBounded()
	for _, id := range tc.nodes {
		if n := tc.stores[id].Stats().SnapshotsSent.Load(); n != 0 {
			t.Errorf("node %d sent %d snapshots; every replica held what the others truncated", id, n)
		}
	}
}

// A follower that truncated its log takes over from a crashed leader and
// catches up a follower that was down meanwhile: from its log if the
// follower was down only since the truncation (it never passes what every
// replica held), by snapshot if the count rule (a small LogKeepEntries)
// truncated past the lagging follower's log meanwhile.
func TestTruncatedFollowerTakesOverAndCatchesUpALaggingOne(t *testing.T) {
	for _, tt := range []struct {
		name     string
		keep     uint64 // LogKeepEntries; 0: the default (2,000)
		snapshot bool
	}{
		{"from the log", 0, false},
		{"by snapshot", 20, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCluster(t, 3, func(c *Config) {
				if tt.keep != 0 {
					c.LogKeepEntries = tt.keep
				}
			})
			kvs := writeRange(tc, 0, 200)
			tc.waitLogsBounded()
			ld := tc.leader(testRangeID)
			old := ld.store.nodeID
			next, lagging := tc.followers(ld)
			nr := tc.stores[next].GetReplica(testRangeID)
			if tr, _, _ := logIndexes(t, nr); tr <= initialIndex {
				t.Fatalf("follower on node %d truncated nothing (truncated index %d)", next, tr)
			}
			lr := tc.stores[lagging].GetReplica(testRangeID)
			tc.crash(lagging)
			_, _, lagLast := logIndexes(t, lr)

			maps.Copy(kvs, writeRange(tc, 200, 300))
			_, ldApplied, _ := logIndexes(t, ld)
			waitFor(t, func() bool { _, a, _ := logIndexes(t, nr); return a >= ldApplied })
			if tr, _, _ := logIndexes(t, nr); tt.snapshot != (tr > lagLast) {
				t.Fatalf("node %d truncated its log to %d with the lagging follower's ending at %d: want a snapshot %v", next, tr, lagLast, tt.snapshot)
			}

			tc.crash(old)
			tc.restart(lagging)
			if got := tc.leader(testRangeID).store.nodeID; got != next {
				t.Fatalf("node %d leads, want %d (the longest log of the two left)", got, next)
			}
			tc.put("after", "x")
			kvs["after"] = "x"
			waitFor(t, func() bool {
				for k, want := range kvs {
					if v, ok, _ := tc.engines[lagging].Get(dataKey(k)); !ok || string(v) != want {
						return false
					}
				}
				return true
			})
			// Counted where the snapshot arrives (only the new leader can
			// send one): the receiver counts it before the replica applies
			// it, so the data seen above implies the count, whereas the
			// sender counts once its send returns, which a loaded machine
			// delayed past the wait (3 of 40 stressed runs).
			if n := tc.stores[lagging].Stats().SnapshotsReceived.Load(); (n > 0) != tt.snapshot {
				t.Errorf("the lagging follower received %d snapshots from the new leader, want a snapshot %v", n, tt.snapshot)
			}

			// The old leader comes back; every replica converges and
			// truncates again under the new leader.
			tc.restart(old)
			maps.Copy(kvs, writeRange(tc, 300, 400))
			tc.waitReplicated(kvs)
			tc.waitLogsBounded()
		})
	}
}
