package raftstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// publishClosed sends the leaseholder's closed timestamps to the other
// stores, as the node's push loop does over the network; skip lists nodes
// that do not receive them (partitioned).
func (tc *testCluster) publishClosed(skip ...uint64) {
	tc.t.Helper()
	var byPeer map[uint64][]*tidekvpb.ClosedTimestamp
	// A new leader publishes once its lease is established.
	waitFor(tc.t, func() bool {
		byPeer = tc.leader(testRangeID).store.ClosedTimestamps(time.Now())
		return len(byPeer) > 0
	})
outer:
	for peer, cts := range byPeer {
		for _, s := range skip {
			if s == peer {
				continue outer
			}
		}
		if st := tc.stores[peer]; st != nil {
			st.ApplyClosedTimestamps(cts)
		}
	}
}

func bounded(d time.Duration) ReadOptions {
	return ReadOptions{Mode: tidekvpb.ReadMode_BOUNDED, MaxStaleness: d}
}

var anyRead = ReadOptions{Mode: tidekvpb.ReadMode_ANY}

func TestBoundedAndAnyReadsOnFollowers(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v1")
	leader := tc.leader(testRangeID)
	var follower, other *Replica
	for _, id := range tc.nodes {
		if r := tc.stores[id].GetReplica(testRangeID); r != leader {
			if follower == nil {
				follower = r
			} else {
				other = r
			}
		}
	}
	ctx := context.Background()
	read := func(r *Replica, ro ReadOptions) (string, error) {
		v, _, err := r.Get(ctx, []byte("k"), ro)
		return string(v), err
	}

	// Without a closed timestamp a follower cannot vouch for any bound.
	var stale *StaleReplicaError
	if _, err := read(follower, bounded(time.Hour)); !errors.As(err, &stale) {
		t.Fatalf("bounded read before any closed timestamp: %v", err)
	}
	// Linearizable reads stay with the leaseholder.
	var nl *NotLeaderError
	if _, err := read(follower, ReadOptions{}); !errors.As(err, &nl) {
		t.Fatalf("linearizable read on a follower: %v", err)
	}

	tc.publishClosed()
	waitFor(t, func() bool { v, err := read(follower, bounded(time.Second)); return err == nil && v == "v1" })
	if v, err := read(leader, bounded(time.Millisecond)); err != nil || v != "v1" {
		t.Fatalf("the leaseholder answers any bound: %q %v", v, err)
	}

	// Cut the follower off; a write commits without it.
	tc.net.Isolate(follower.store.nodeID, tc.nodes, true)
	tc.put("k", "v2")
	tc.publishClosed(follower.store.nodeID)
	waitFor(t, func() bool { v, err := read(other, bounded(time.Second)); return err == nil && v == "v2" })

	// The isolated follower's last closed timestamp ages past a short bound.
	time.Sleep(150 * time.Millisecond)
	if _, err := read(follower, bounded(100*time.Millisecond)); !errors.As(err, &stale) || stale.Staleness < 100*time.Millisecond {
		t.Fatalf("aged closed timestamp: %v", err)
	}
	// Even a fresh closed timestamp does not help until the follower applied
	// its index (it cannot, being cut off).
	tc.publishClosed()
	if _, err := read(follower, bounded(time.Hour)); !errors.As(err, &stale) {
		t.Fatalf("closed timestamp not yet applied: %v", err)
	}
	// ANY reads serve whatever is local, stale included.
	if v, err := read(follower, anyRead); err != nil || v != "v1" {
		t.Fatalf("any read on the cut-off follower: %q %v", v, err)
	}

	// Healed, it catches up and serves bounded reads again.
	tc.net.Isolate(follower.store.nodeID, tc.nodes, false)
	waitFor(t, func() bool {
		tc.publishClosed()
		v, err := read(follower, bounded(time.Second))
		return err == nil && v == "v2"
	})
	if _, err := read(follower, ReadOptions{Mode: tidekvpb.ReadMode_BOUNDED}); err == nil {
		t.Fatal("bounded read without a bound accepted")
	}
}

// A deposed leader (cut off, its lease run out) publishes nothing, so it can
// never vouch for writes a newer leader committed.
func TestNoClosedTimestampsWithoutLease(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v1")
	old := tc.leader(testRangeID)
	tc.net.Isolate(old.store.nodeID, tc.nodes, true)
	waitFor(t, func() bool { return !old.leaseValid() })
	if got := old.store.ClosedTimestamps(time.Now()); len(got) != 0 {
		t.Fatalf("deposed leader published %v", got)
	}
}

// A node whose clock the offset monitor does not trust holds no lease: its
// leader replicas serve linearizable reads through ReadIndex only and
// publish no closed timestamps, and as a follower it serves no BOUNDED
// read, whose staleness its clock would measure. Trusted again, it does.
func TestUntrustedClockHoldsNoLease(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v1")
	ld := tc.leader(testRangeID)
	waitFor(t, ld.leaseCovers)
	tc.publishClosed()
	var follower *Replica
	for _, id := range tc.nodes {
		if r := tc.stores[id].GetReplica(testRangeID); r != ld {
			follower = r
		}
	}
	ctx := context.Background()
	waitFor(t, func() bool {
		_, _, err := follower.Get(ctx, []byte("k"), bounded(time.Minute))
		return err == nil
	})

	ld.store.SetClockTrusted(false, "test: clock far from its peers")
	follower.store.SetClockTrusted(false, "test: clock far from its peers")
	if ld.leaseCovers() {
		t.Fatal("a leader with an untrusted clock still holds its lease")
	}
	if got := ld.store.ClosedTimestamps(time.Now()); len(got) != 0 {
		t.Fatalf("a leader with an untrusted clock published %v", got)
	}
	var stale *StaleReplicaError
	if _, _, err := follower.Get(ctx, []byte("k"), bounded(time.Minute)); !errors.As(err, &stale) {
		t.Fatalf("bounded read on a follower with an untrusted clock: %v, want a stale-replica refusal", err)
	}
	if v, ok := tc.get("k"); !ok || v != "v1" {
		t.Fatalf("linearizable read without the lease: %q, %v", v, ok)
	}
	tc.put("k", "v2")
	if ld.store.ClockUntrusted() == "" {
		t.Fatal("ClockUntrusted lost the reason")
	}

	ld.store.SetClockTrusted(true, "")
	follower.store.SetClockTrusted(true, "")
	waitFor(t, func() bool { l := tc.leader(testRangeID); return l.leaseCovers() })
	if _, _, err := follower.Get(ctx, []byte("k"), bounded(time.Minute)); err != nil {
		t.Fatalf("bounded read on a follower trusted again: %v", err)
	}
}

func TestMaxClockOffsetBound(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SnapshotDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	// A 1 s election timeout allows 400 ms.
	cfg.MaxClockOffset = 400 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatalf("400ms: %v", err)
	}
	for _, d := range []time.Duration{401 * time.Millisecond, 0, -time.Millisecond} {
		cfg.MaxClockOffset = d
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "at most 400ms") {
			t.Fatalf("max offset %v: %v, want a refusal naming the 400ms bound", d, err)
		}
	}
}

// ClosedTimestampsTo closes only the ranges with a replica on the peer: a
// node answering a peer's exchange sends it what ClosedTimestamps would
// have sent it, and nothing for a node without a replica.
func TestClosedTimestampsTo(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v1")
	ld := tc.leader(testRangeID)
	var follower uint64
	for _, id := range tc.nodes {
		if tc.stores[id] != ld.store {
			follower = id
		}
	}
	var cts []*tidekvpb.ClosedTimestamp
	waitFor(t, func() bool {
		cts = ld.store.ClosedTimestampsTo(time.Now(), follower)
		return len(cts) > 0
	})
	if len(cts) != 1 || cts[0].GetRangeId() != testRangeID || cts[0].GetIndex() == 0 {
		t.Fatalf("closed timestamps for node %d: %v, want range %d's", follower, cts, testRangeID)
	}
	if got := ld.store.ClosedTimestampsTo(time.Now(), 99); len(got) != 0 {
		t.Fatalf("closed timestamps for node 99, which holds no replica: %v", got)
	}
}
