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
