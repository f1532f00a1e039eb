package raftstore

import (
	"fmt"
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
