package raftstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// versionedDump renders every engine key and value of the versioned
// layout on a node, to compare replicas byte for byte.
func versionedDump(t *testing.T, eng storage.Reader) string {
	t.Helper()
	lo, hi := dataSpan(&tidekvpb.RangeDescriptor{}, true)
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var b strings.Builder
	for ok := it.First(); ok; ok = it.Next() {
		fmt.Fprintf(&b, "%x=%x\n", it.Key(), it.Value())
	}
	return b.String()
}

// versionsOf counts the versions stored on a node.
func versionsOf(t *testing.T, eng storage.Reader) int64 {
	t.Helper()
	lo, hi := keys.VersionedSpan(nil, nil)
	st, err := mvcc.ComputeStats(eng, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	return st.Versions
}

// gcAt runs a GC pass of a range through its leader at safePoint and
// waits until every node applied all of it.
func (tc *testCluster) gcAt(t *testing.T, rangeID uint64, safePoint hlc.Timestamp) GCResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := tc.leader(rangeID)
	res, err := l.GC(ctx, safePoint)
	if err != nil {
		t.Fatal(err)
	}
	applied := l.applied.Load()
	waitFor(t, func() bool {
		for _, s := range tc.stores {
			if r := s.GetReplica(rangeID); r == nil || r.applied.Load() < applied {
				return false
			}
		}
		return true
	})
	return res
}

// An overwritten range's GC runs in several chunks and removes exactly the
// same versions on every replica; the newest values and the versions a
// read at the safe point needs stay.
func TestGCAppliesIdenticallyOnReplicas(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.GCChunkVersions = 7 })
	tc.migrate(t, testRangeID)
	for round := range 5 {
		for i := range 20 {
			tc.put(fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", round))
		}
	}
	tc.put("gone", "x")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tc.leader(testRangeID).Write(ctx, []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_DELETE, Key: []byte("gone")}}); err != nil {
		t.Fatal(err)
	}
	safePoint := tc.leader(testRangeID).store.hlc.Now()
	tc.put("k00", "after") // above the safe point: k00's v4 stays for reads at it
	res := tc.gcAt(t, testRangeID, safePoint)
	// 20 keys × 4 old versions, and "gone"'s value and tombstone; what
	// stays is each key's newest and k00's version at the safe point.
	if res.Versions != 82 || res.Chunks < 2 {
		t.Fatalf("GC removed %d versions in %d chunks, want 82 in several", res.Versions, res.Chunks)
	}
	if after := versionsOf(t, tc.engines[1]); after != 21 {
		t.Fatalf("node 1 holds %d versions after GC, want 21", after)
	}
	want := versionedDump(t, tc.engines[1])
	for _, id := range tc.nodes[1:] {
		if got := versionedDump(t, tc.engines[id]); got != want {
			t.Fatalf("node %d's versions differ from node 1's after GC:\n%s\nvs\n%s", id, got, want)
		}
	}
	r := tc.leader(testRangeID)
	if got, ok, err := r.Get(ctx, []byte("k00"), ReadOptions{Timestamp: safePoint}); err != nil || !ok || string(got) != "v4" {
		t.Fatalf("k00 at the safe point: %q, %v, %v; want v4", got, ok, err)
	}
	tc.checkValues(t, map[string]string{"k00": "after", "k19": "v4"})
	if _, ok := tc.get("gone"); ok {
		t.Fatal("a deleted key reads after GC removed its tombstone")
	}
}

// A read below the threshold is refused with one sentence naming both
// timestamps and the range, on the leader and on followers; at the
// threshold it reads. The threshold is persisted with the replica state.
func TestReadBelowGCThresholdRefused(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.migrate(t, testRangeID)
	tc.put("a", "1")
	safePoint := tc.leader(testRangeID).store.hlc.Now()
	tc.gcAt(t, testRangeID, safePoint)
	below := hlc.Timestamp{WallTime: safePoint.WallTime - 1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := fmt.Sprintf("read at %s is below the GC threshold %s of range %d; retention is gc-ttl (its key space's, else the cluster's)", below, safePoint, testRangeID)
	for _, id := range tc.nodes {
		r := tc.stores[id].GetReplica(testRangeID)
		ro := ReadOptions{Mode: tidekvpb.ReadMode_ANY, Timestamp: below}
		_, _, err := r.Get(ctx, []byte("a"), ro)
		var gce *GCThresholdError
		if !errors.As(err, &gce) || err.Error() != want {
			t.Fatalf("node %d: get below the threshold: %v; want %q", id, err, want)
		}
		if _, _, err := r.Scan(ctx, []byte("a"), nil, 10, 1<<20, ro); !errors.As(err, &gce) {
			t.Fatalf("node %d: scan below the threshold: %v", id, err)
		}
		if _, err := r.BatchGet(ctx, [][]byte{[]byte("a")}, ro); !errors.As(err, &gce) {
			t.Fatalf("node %d: batch get below the threshold: %v", id, err)
		}
		// A follower reads at a timestamp once its closed timestamp is there.
		ro.Timestamp = safePoint
		waitFor(t, func() bool {
			tc.publishClosed()
			v, ok, err := r.Get(ctx, []byte("a"), ro)
			return err == nil && ok && string(v) == "1"
		})
	}
	// The threshold never moves back, and survives a restart.
	tc.gcAt(t, testRangeID, below)
	if got := tc.leader(testRangeID).GCThreshold(); got != safePoint {
		t.Fatalf("threshold after a GC at an older safe point: %s, want %s", got, safePoint)
	}
	tc.crash(3)
	tc.restart(3)
	if got := tc.stores[3].GetReplica(testRangeID).GCThreshold(); got != safePoint {
		t.Fatalf("threshold after a restart: %s, want %s", got, safePoint)
	}
}

// Both halves of a split keep the threshold, a merge takes the higher of
// the two, and a snapshot carries it to a new replica with the history.
func TestGCThresholdThroughSplitMergeSnapshot(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.migrate(t, testRangeID)
	tc.put("a", "1")
	tc.put("x", "2")
	t1 := tc.leader(testRangeID).store.hlc.Now()
	tc.gcAt(t, testRangeID, t1)
	tc.splitAt(t, "m", 3)
	tc.checkThreshold(t, testRangeID, t1)
	tc.checkThreshold(t, 3, t1)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tc.leader(3).Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("x"), Value: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	t2 := tc.leader(3).store.hlc.Now()
	tc.gcAt(t, 3, t2)
	tc.checkThreshold(t, 3, t2)
	tc.checkThreshold(t, testRangeID, t1)
	frozen := tc.freezeEverywhere(t, 3, testRangeID)
	if _, err := tc.leader(testRangeID).Merge(ctx, frozen); err != nil {
		t.Fatal(err)
	}
	tc.checkThreshold(t, testRangeID, t2)

	n4 := tc.addNode()
	if _, err := tc.leader(testRangeID).ChangeReplicas(ctx, n4, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		r := tc.stores[n4].GetReplica(testRangeID)
		return r != nil && r.Desc() != nil && r.GCThreshold() == t2
	})
	if r4 := tc.stores[n4].GetReplica(testRangeID); r4.SnapshotsApplied() == 0 {
		t.Fatal("the new replica caught up without a snapshot")
	}
	if got, want := versionedDump(t, tc.engines[n4]), versionedDump(t, tc.engines[1]); got != want {
		t.Fatalf("the snapshot's versions differ from node 1's:\n%s\nvs\n%s", got, want)
	}
}

// checkThreshold waits until every replica of the range has threshold want.
func (tc *testCluster) checkThreshold(t *testing.T, rangeID uint64, want hlc.Timestamp) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []string
		for _, id := range tc.nodes {
			if r := tc.stores[id].GetReplica(rangeID); r != nil && r.GCThreshold() != want {
				got = append(got, fmt.Sprintf("node %d: %s", id, r.GCThreshold()))
			}
		}
		if len(got) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("range %d's GC threshold, want %s: %s", rangeID, want, strings.Join(got, ", "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A write stamped at or below the threshold lands just above it: below,
// it could slip under a tombstone GC removed.
func TestApplyWriteAboveGCThreshold(t *testing.T) {
	eng := storage.NewMem()
	r := bareReplica(eng, "", "", true)
	ab := newApplyBatch(eng)
	if res := r.applyGCLocked(ab, &tidekvpb.GCCommand{SafePoint: logTimestamp(hlc.Timestamp{WallTime: 500}), Budget: 10}); res.err != nil {
		t.Fatal(res.err)
	}
	if res := r.applyWritesLocked(ab, at(100, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("a", "1")}})); res.err != nil {
		t.Fatal(res.err)
	}
	if err := ab.commit(); err != nil {
		t.Fatal(err)
	}
	v, err := mvcc.Get(eng, keys.VersionedKey([]byte("a")), hlc.MaxTimestamp)
	if want := (hlc.Timestamp{WallTime: 500, Logical: 1}); err != nil || v.Timestamp != want {
		t.Fatalf("write below the threshold landed at %s (%v), want %s", v.Timestamp, err, want)
	}
	unversioned := bareReplica(eng, "", "", false)
	if res := unversioned.applyGCLocked(newApplyBatch(eng), &tidekvpb.GCCommand{SafePoint: logTimestamp(hlc.Timestamp{WallTime: 500}), Budget: 10}); !errors.Is(res.err, ErrInvalidRequest) {
		t.Fatalf("GC of an unversioned range: %v", res.err)
	}
}

// BenchmarkGCChunk times one GC command's apply at the default budget, its
// batch's commit included, on Pebble with the production options: 100-byte
// values with 10 versions each, flushed to SSTs, every version but the
// newest below the safe point, so nearly every version visited is removed
// (the worst case). The node's scheduler is held that long
// (docs/transactions.md step 4). Run with -benchtime 1x.
func BenchmarkGCChunk(b *testing.B) {
	budget := DefaultConfig().GCChunkVersions
	for range b.N {
		b.StopTimer()
		eng := loadVersions(b, int(budget)/5, 10, 100)
		r := bareReplica(eng, "", "", true)
		b.StartTimer()
		ab := newApplyBatch(eng)
		res := r.applyGCLocked(ab, &tidekvpb.GCCommand{SafePoint: logTimestamp(hlc.Timestamp{WallTime: 1000}), Budget: budget})
		if res.err != nil || res.gc.resume == nil {
			b.Fatalf("%v, resume %q", res.err, res.gc.resume)
		}
		if err := ab.commit(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(res.gc.stats.Versions), "removed/op")
		eng.Close()
	}
}

// loadVersions opens a Pebble engine holding n keys of versions versions
// of valueLen bytes at wall times 1..versions, flushed to SSTs.
func loadVersions(b *testing.B, n, versions, valueLen int) storage.Engine {
	val := make([]byte, valueLen)
	return loadPebble(b, func(w storage.Writer) error {
		for i := range n {
			for v := range versions {
				if err := mvcc.Put(w, keys.VersionedKey(fmt.Appendf(nil, "user%011d", i)), hlc.Timestamp{WallTime: int64(v + 1)}, val); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Before log version 5 no GC is proposed: a binary at 4 would apply it as
// an empty write and keep what the others removed.
func TestGCNeedsLogVersion5(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.InitialLogVersion = LogVersionMVCC })
	tc.migrate(t, testRangeID)
	tc.put("a", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := tc.leader(testRangeID)
	if _, err := l.GC(ctx, l.store.hlc.Now()); !errors.Is(err, ErrLogVersion) || !strings.Contains(err.Error(), "needs log version 5") {
		t.Fatalf("GC at log version 4: %v", err)
	}
}
