package raftstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Writes and CAS commands queued in one scheduler round share one Raft
// entry, and each waiter gets its own command's result.
func TestConcurrentWritesShareOneEntry(t *testing.T) {
	tc := newTestCluster(t, 3)
	if n := concurrentWriteEntries(t, tc); n != 1 {
		t.Fatalf("6 commands took %d Raft entries, want 1", n)
	}
}

// Before the cluster's log version allows shared entries (a node may run a
// binary that would apply one as empty), each command has an entry of its
// own, with the same results.
func TestNoSharedEntriesBeforeLogVersion2(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.InitialLogVersion = LogVersionBase })
	if n := concurrentWriteEntries(t, tc); n != 6 {
		t.Fatalf("6 commands took %d Raft entries at log version 1, want 6", n)
	}
	for _, s := range tc.stores {
		if err := s.RaiseLogVersion(LogVersionShared); err != nil {
			t.Fatal(err)
		}
	}
	if n := concurrentWriteEntries(t, tc); n != 1 {
		t.Fatalf("6 commands took %d Raft entries once raised to version 2, want 1", n)
	}
}

// concurrentWriteEntries queues four deletes and two CAS commands at the
// leaseholder in one scheduler round, checks every result, and returns how
// many Raft entries they took.
func concurrentWriteEntries(t *testing.T, tc *testCluster) uint64 {
	t.Helper()
	tc.put("old1", "x")
	tc.put("old2", "x")
	tc.put("c", "v0")
	r := tc.leader(testRangeID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Holding mu keeps the scheduler from draining the queue until every
	// command is in it.
	r.mu.Lock()
	applied := r.mu.state.GetAppliedIndex()
	type result struct {
		deleted bool
		cas     *tidekvpb.CompareAndSetResponse
		err     error
	}
	keys := []string{"old1", "new1", "old2", "new2"}
	results := make([]result, len(keys)+2)
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[i]
			res.deleted, res.err = r.Write(ctx, []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_DELETE, Key: []byte(k)}})
		}()
	}
	for i, expect := range []string{"v0", "wrong"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[len(keys)+i]
			res.cas, res.err = r.CompareAndSet(ctx, &tidekvpb.CompareAndSetRequest{Key: []byte("c"),
				ExpectExists: true, ExpectedValue: []byte(expect), NewValue: []byte("v-" + expect)})
		}()
	}
	waitFor(t, func() bool {
		r.in.Lock()
		defer r.in.Unlock()
		return len(r.in.props) == len(results)
	})
	r.mu.Unlock()
	wg.Wait()

	for i, k := range keys {
		want := k[:3] == "old"
		if res := results[i]; res.err != nil || res.deleted != want {
			t.Errorf("delete %s: deleted=%v err=%v, want deleted=%v", k, res.deleted, res.err, want)
		}
	}
	// The CAS commands apply in their queue order, which the goroutines
	// do not fix: exactly one of them matches, whichever ran first.
	ok0, ok1 := results[len(keys)].cas.GetSucceeded(), results[len(keys)+1].cas.GetSucceeded()
	if results[len(keys)].err != nil || results[len(keys)+1].err != nil || !ok0 || ok1 {
		t.Errorf("CAS results %+v, %+v: want the one expecting v0 to succeed and the other to fail", results[len(keys)], results[len(keys)+1])
	}
	if v, _ := tc.get("c"); v != "v-v0" {
		t.Errorf("c = %q, want v-v0", v)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.state.GetAppliedIndex() - applied
}

// Concurrent writers (whose writes share entries) run while nodes lose
// power, the leaseholder included; every acknowledged write survives, even
// when at the end every node loses what it had not synced.
func TestPowerLossKeepsAcknowledgedBatchedWrites(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	tc := newTestCluster(t, 3, func(c *Config) { c.LogKeepEntries = 20 })
	tc.rng = rand.New(rand.NewPCG(seed, seed))
	var mu sync.Mutex
	acked := map[string]string{}
	writes := 0
	for round := 0; round < 4; round++ {
		// The writers use this round's stores: the map changes under them
		// when a node crashes, and a crashed store refuses writes.
		var stores []*Store
		for _, s := range tc.stores {
			stores = append(stores, s)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k, v := fmt.Sprintf("r%d-w%02d-%03d", round, w, i), fmt.Sprint(i)
					if tryPut(stores, k, v) {
						mu.Lock()
						acked[k] = v
						writes++
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(150 * time.Millisecond)
		victim := tc.leader(testRangeID).store.nodeID // the leaseholder, mid-batch, on even rounds
		if round%2 == 1 {
			victim = tc.nodes[(int(victim))%len(tc.nodes)]
		}
		tc.powerLoss(victim)
		time.Sleep(150 * time.Millisecond)
		close(stop)
		wg.Wait()
		tc.restart(victim)
	}
	for _, id := range tc.nodes {
		tc.powerLoss(id)
	}
	for _, id := range tc.nodes {
		tc.restart(id)
	}
	// Unbatched, every acknowledged write would have had its own entry.
	r := tc.leader(testRangeID)
	r.mu.Lock()
	entries := r.mu.state.GetAppliedIndex()
	r.mu.Unlock()
	if writes < 100 || entries >= uint64(writes) {
		t.Fatalf("%d writes acknowledged in %d entries: want over 100 writes sharing entries", writes, entries)
	}
	for k, want := range acked {
		if got, ok := tc.get(k); !ok || got != want {
			t.Fatalf("after power loss %s = %q (found %v), acknowledged %q", k, got, ok, want)
		}
	}
}

// tryPut writes once through the leader among stores (if any) with a
// short timeout, and reports whether the write was acknowledged.
func tryPut(stores []*Store, key, value string) bool {
	var r *Replica
	for _, s := range stores {
		if rr := s.GetReplica(testRangeID); rr != nil && rr.IsLeader() {
			r = rr
		}
	}
	if r == nil {
		time.Sleep(5 * time.Millisecond)
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte(key), Value: []byte(value)}})
	return err == nil
}
