package raftstore

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// hardStateWatch is an in-memory engine that compares each HardState of
// testRangeID set on it with the one set before.
type hardStateWatch struct {
	*storage.MemEngine
	mu      sync.Mutex
	last    *raftpb.HardState
	written int
	// repeats are HardStates written with the term and vote of the one
	// before: only their commit index moved.
	repeats []string
}

func (e *hardStateWatch) NewBatch() storage.Batch {
	return hardStateWatchBatch{Batch: e.MemEngine.NewBatch(), e: e}
}

type hardStateWatchBatch struct {
	storage.Batch
	e *hardStateWatch
}

func (b hardStateWatchBatch) Set(key, value []byte) error {
	if bytes.Equal(key, keys.HardStateKey(testRangeID)) {
		hs := &raftpb.HardState{}
		if err := proto.Unmarshal(value, hs); err != nil {
			return err
		}
		b.e.mu.Lock()
		if l := b.e.last; l != nil && l.GetTerm() == hs.GetTerm() && l.GetVote() == hs.GetVote() {
			b.e.repeats = append(b.e.repeats, fmt.Sprintf("term %d vote %d: commit %d after %d",
				hs.GetTerm(), hs.GetVote(), hs.GetCommit(), l.GetCommit()))
		}
		b.e.last = hs
		b.e.written++
		b.e.mu.Unlock()
	}
	return b.Batch.Set(key, value)
}

// A HardState reaches the disk only when its term or vote moved: writes,
// which move only the commit index, put none there
// (hardStateDurableLocked), while each node's on-disk term and vote stay
// those its Raft has. The whole cluster restarted from such HardStates,
// whose commit indexes are older than what was applied, serves every
// acknowledged write and goes on writing.
func TestHardStateWrittenOnlyForTermOrVote(t *testing.T) {
	engines := map[uint64]*hardStateWatch{}
	tc := newTestClusterOn(t, 3, func(node uint64) storage.Engine {
		engines[node] = &hardStateWatch{MemEngine: storage.NewMem()}
		return engines[node]
	}, nil)
	acked := map[string]string{}
	for i := range 30 {
		k, v := fmt.Sprintf("k%02d", i%10), fmt.Sprint(i)
		tc.put(k, v)
		acked[k] = v
	}
	tc.waitReplicated(acked)
	for _, id := range tc.nodes {
		e := engines[id]
		r := tc.stores[id].GetReplica(testRangeID)
		r.mu.Lock()
		st := r.mu.raw.Status()
		r.mu.Unlock()
		e.mu.Lock()
		if len(e.repeats) > 0 {
			t.Errorf("node %d wrote %d HardStates that moved only the commit index, e.g. %s", id, len(e.repeats), e.repeats[0])
		}
		if e.last.GetTerm() != st.GetTerm() || e.last.GetVote() != st.GetVote() {
			t.Errorf("node %d: term %d vote %d on disk, its Raft has term %d vote %d", id, e.last.GetTerm(), e.last.GetVote(), st.GetTerm(), st.GetVote())
		}
		if e.last.GetCommit() >= st.Applied {
			t.Errorf("node %d: the commit index on disk (%d) reached the applied index (%d): writes moved it", id, e.last.GetCommit(), st.Applied)
		}
		e.mu.Unlock()
	}
	for _, id := range tc.nodes {
		tc.crash(id)
	}
	for _, id := range tc.nodes {
		tc.startStoreOn(id, engines[id])
	}
	tc.checkAcknowledged(t, acked)
}

// A follower that installs a snapshot in its leader's term writes no
// HardState for it (term and vote are unchanged), so the commit index on
// its disk stays below the snapshot's index: the first index of its log
// once restarted, from which Raft refuses (panics on) a smaller commit.
// Restarted from its engine, it comes up (loadRaftState raises the commit
// to the applied index), takes the lease, serves further writes and holds
// every acknowledged one.
func TestRestartAfterSnapshotInSameTerm(t *testing.T) {
	engines := map[uint64]*hardStateWatch{}
	tc := newTestClusterOn(t, 3, func(node uint64) storage.Engine {
		engines[node] = &hardStateWatch{MemEngine: storage.NewMem()}
		return engines[node]
	}, nil, func(c *Config) { c.LogKeepEntries = 5 })
	tc.moveLease(1)
	const lag = 3
	acked := map[string]string{}
	for i := range 10 {
		k, v := fmt.Sprintf("a%02d", i), "v"
		tc.put(k, v)
		acked[k] = v
	}
	tc.waitReplicated(acked)
	// Node 3 keeps running but hears nothing, and with its clock held
	// starts no election: its term and vote stay the leader's.
	tc.holdTicks(true, lag)
	tc.net.Isolate(lag, tc.nodes, true)
	r3 := tc.stores[lag].GetReplica(testRangeID)
	behind := r3.applied.Load()
	for i := range 60 { // the leader truncates its log past node 3's
		k, v := fmt.Sprintf("b%02d", i), fmt.Sprint(i)
		tc.put(k, v)
		acked[k] = v
	}
	ld := tc.leader(testRangeID)
	ld.mu.Lock()
	leaderTruncated := ld.mu.state.GetTruncatedIndex()
	ld.mu.Unlock()
	if leaderTruncated <= behind {
		t.Fatalf("the leader's log starts at %d, node 3 applied %d: no snapshot is needed", leaderTruncated+1, behind)
	}
	e := engines[lag]
	e.mu.Lock()
	writtenBefore := e.written
	e.mu.Unlock()
	r3.mu.Lock()
	before := r3.mu.raw.Status()
	r3.mu.Unlock()

	tc.net.Isolate(lag, tc.nodes, false)
	waitFor(t, func() bool { return r3.applied.Load() >= leaderTruncated })
	if tc.stores[lag].stats.SnapshotsReceived.Load() == 0 {
		t.Fatal("node 3 caught up without a snapshot")
	}
	r3.mu.Lock()
	after := r3.mu.raw.Status()
	truncated := r3.mu.state.GetTruncatedIndex()
	r3.mu.Unlock()
	e.mu.Lock()
	written, onDisk := e.written, e.last.GetCommit()
	e.mu.Unlock()
	if after.GetTerm() != before.GetTerm() || after.GetVote() != before.GetVote() || written != writtenBefore {
		t.Fatalf("node 3 went from term %d vote %d to term %d vote %d and wrote %d HardStates installing the snapshot: the case is not reached",
			before.GetTerm(), before.GetVote(), after.GetTerm(), after.GetVote(), written-writtenBefore)
	}
	if onDisk >= truncated {
		t.Fatalf("node 3's commit index on disk (%d) reached its log's start (%d): the case is not reached", onDisk, truncated)
	}

	tc.crash(lag)
	tc.startStoreOn(lag, e)
	tc.moveLease(lag) // node 3 then serves the writes and reads below
	for i := range 10 {
		k, v := fmt.Sprintf("c%02d", i), "v"
		tc.put(k, v)
		acked[k] = v
	}
	tc.checkAcknowledged(t, acked)
}
