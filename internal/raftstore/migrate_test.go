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

func at(wall int64, cmd *tidekvpb.RaftCommand) *tidekvpb.RaftCommand {
	cmd.Timestamp = logTimestamp(hlc.Timestamp{WallTime: wall})
	return cmd
}

// TestApplyMigrateLayout: a migration rewrites the range's unversioned
// data, including what its own apply batch wrote before it, as versions at
// its timestamp, and commands after it in the same batch see the migrated
// data; a write proposed before it but applied after lands above it.
func TestApplyMigrateLayout(t *testing.T) {
	eng := storage.NewMem()
	r := bareReplica(eng, "a", "m", false)
	ab := newApplyBatch(eng)
	if res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("a", "1"), putOp("b", "2"), putOp("c", "3")}}); res.err != nil || ab.commit() != nil {
		t.Fatal(res.err)
	}
	ab = newApplyBatch(eng)
	if res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("d", "4"), delOp("c")}}); res.err != nil {
		t.Fatal(res.err)
	}
	if res, post := r.applyMigrateLocked(ab, at(200, &tidekvpb.RaftCommand{MigrateLayout: &tidekvpb.MigrateLayoutCommand{}})); res.err != nil || len(post) != 1 {
		t.Fatalf("migration: %v, %d post steps", res.err, len(post))
	}
	if !isMVCC(r.mu.state) {
		t.Fatal("the replica state does not record the versioned layout")
	}
	// In the same batch: a CAS reads the migrated value, and a write
	// stamped below the migration lands above it.
	if res := r.applyCASLocked(ab, at(300, &tidekvpb.RaftCommand{Cas: &tidekvpb.LogCompareAndSet{Key: []byte("a"), ExpectExists: true,
		ExpectedValue: []byte("1"), NewValue: []byte("10")}})); res.err != nil || !res.cas.GetSucceeded() {
		t.Fatalf("cas on a migrated key in the migration's batch: %+v", res)
	}
	if res := r.applyWritesLocked(ab, at(100, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("b", "20")}})); res.err != nil {
		t.Fatal(res.err)
	}
	if err := ab.commit(); err != nil {
		t.Fatal(err)
	}
	if got := scanAll(t, r); got != "a=10 b=20 d=4" {
		t.Fatalf("after the migration: %s", got)
	}
	lo, hi := keys.DataSpan(2, nil, nil)
	if n, err := eng.ApproximateSize(lo, hi); err != nil || n != 0 {
		t.Fatalf("%d bytes of unversioned keys left after the migration (%v)", n, err)
	}
	for _, c := range []struct {
		key, want string
		ts, read  hlc.Timestamp
	}{
		{"a", "1", hlc.Timestamp{WallTime: 200}, hlc.Timestamp{WallTime: 250}},
		{"a", "10", hlc.Timestamp{WallTime: 300}, hlc.MaxTimestamp},
		{"b", "20", hlc.Timestamp{WallTime: 200, Logical: 1}, hlc.MaxTimestamp},
	} {
		v, err := mvcc.Get(eng, keys.VersionedKey([]byte(c.key)), c.read)
		if err != nil || string(v.Value) != c.want || v.Timestamp != c.ts {
			t.Errorf("%s at %s: %q at %s (%v), want %q at %s", c.key, c.read, v.Value, v.Timestamp, err, c.want, c.ts)
		}
	}

	// Again: nothing to do. A write without a timestamp is refused.
	ab = newApplyBatch(eng)
	defer ab.b.Close()
	if res, post := r.applyMigrateLocked(ab, at(400, &tidekvpb.RaftCommand{MigrateLayout: &tidekvpb.MigrateLayoutCommand{}})); res.err != nil || post != nil || !ab.b.Empty() {
		t.Fatalf("second migration: %v, %d post steps", res.err, len(post))
	}
	if res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("e", "5")}}); !errors.Is(res.err, ErrLogVersion) || !ab.b.Empty() {
		t.Fatalf("a write without a timestamp on the versioned layout: %v", res.err)
	}
	// The meta range and a command without a timestamp do not migrate.
	meta := bareReplica(eng, "", "", false)
	meta.rangeID = keys.MetaRangeID
	if res, _ := meta.applyMigrateLocked(ab, at(400, &tidekvpb.RaftCommand{MigrateLayout: &tidekvpb.MigrateLayoutCommand{}})); !errors.Is(res.err, ErrInvalidRequest) {
		t.Fatalf("meta range migration: %v", res.err)
	}
	other := bareReplica(eng, "m", "", false)
	if res, _ := other.applyMigrateLocked(ab, &tidekvpb.RaftCommand{MigrateLayout: &tidekvpb.MigrateLayoutCommand{}}); !errors.Is(res.err, ErrInvalidRequest) {
		t.Fatalf("migration without a timestamp: %v", res.err)
	}
}

// migrate moves a range to the versioned layout through its leader and
// waits until every replica has.
func (tc *testCluster) migrate(t *testing.T, rangeID uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tc.leader(rangeID).MigrateLayout(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		for _, s := range tc.stores {
			if r := s.GetReplica(rangeID); r == nil || !r.VersionedLayout() {
				return false
			}
		}
		return true
	})
}

func (tc *testCluster) checkValues(t *testing.T, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := tc.get(k); !ok || got != v {
			t.Fatalf("%s = %q, %v; want %q", k, got, ok, v)
		}
	}
}

// A range with data migrates on every replica: its values read the same
// before and after, writes and deletes go on, no unversioned key is left;
// a split hands the right half the layout, and a new replica gets it, and
// the whole history, by snapshot.
func TestMigrateLayoutAcrossSplitAndSnapshot(t *testing.T) {
	tc := newTestCluster(t, 3)
	want := map[string]string{}
	for i := range 200 {
		k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d", i)
		tc.put(k, v)
		want[k] = v
	}
	tc.checkValues(t, want)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Live bytes count the same in both layouts.
	live := liveOf(want, "")
	if n, err := tc.leader(testRangeID).DataSize(ctx); err != nil || n.Live != live {
		t.Fatalf("live bytes before the migration: %d, %v; want %d", n, err, live)
	}
	tc.migrate(t, testRangeID)
	tc.checkValues(t, want)
	if n, err := tc.leader(testRangeID).DataSize(ctx); err != nil || n.Live != live {
		t.Fatalf("live bytes after the migration: %d, %v; want %d", n, err, live)
	}
	for _, id := range tc.nodes {
		lo, hi := keys.DataSpan(testRangeID, nil, nil)
		if n, err := tc.engines[id].ApproximateSize(lo, hi); err != nil || n != 0 {
			t.Fatalf("node %d keeps %d bytes of unversioned data (%v)", id, n, err)
		}
	}
	tc.put("k000", "new")
	want["k000"] = "new"
	if deleted, err := tc.leader(testRangeID).Write(ctx, []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_DELETE, Key: []byte("k001")}}); err != nil || !deleted {
		t.Fatalf("delete after the migration: %v, %v", deleted, err)
	}
	delete(want, "k001")
	if _, ok := tc.get("k001"); ok {
		t.Fatal("k001 reads after its delete")
	}

	tc.splitAt(t, "k100", 3)
	tc.checkValues(t, want)
	rhs := tc.leader(3)
	if !rhs.VersionedLayout() {
		t.Fatal("the right half of a split is not versioned")
	}
	if key, err := rhs.SizeSplitKey(ctx); err != nil || string(key) <= "k100" {
		t.Fatalf("split key of the versioned right half: %q, %v", key, err)
	}
	if n, err := rhs.DataSize(ctx); err != nil || n.Live != liveOf(want, "k100") {
		t.Fatalf("live bytes of the right half: %d, %v; want %d", n, err, liveOf(want, "k100"))
	}

	n4 := tc.addNode()
	if _, err := rhs.ChangeReplicas(ctx, n4, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		r := tc.stores[n4].GetReplica(3)
		return r != nil && r.VersionedLayout() && r.Desc() != nil
	})
	r4 := tc.stores[n4].GetReplica(3)
	for k, v := range want {
		if k < "k100" {
			continue
		}
		if got, ok, err := r4.Get(ctx, []byte(k), ReadOptions{Mode: tidekvpb.ReadMode_ANY}); err != nil || !ok || string(got) != v {
			t.Fatalf("%s on the snapshot's replica: %q, %v, %v; want %q", k, got, ok, err, v)
		}
	}
	if r4.SnapshotsApplied() == 0 {
		t.Fatal("the new replica caught up without a snapshot")
	}
}

// A replica that was down through the migration, and whose log the others
// truncated meanwhile, catches up by a snapshot in the versioned layout
// that replaces its unversioned data.
func TestSnapshotReplacesUnversionedData(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.LogKeepEntries = 5 })
	want := map[string]string{}
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		tc.put(k, "old")
		want[k] = "old"
	}
	behind := tc.nodes[2]
	if tc.leader(testRangeID).store.nodeID == behind {
		behind = tc.nodes[1]
	}
	waitFor(t, func() bool { _, ok, _ := tc.engines[behind].Get(dataKey("k29")); return ok })
	tc.crash(behind)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tc.leader(testRangeID).MigrateLayout(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		tc.put(k, "new")
		want[k] = "new"
	}
	tc.restart(behind)
	waitFor(t, func() bool {
		r := tc.stores[behind].GetReplica(testRangeID)
		return r != nil && r.VersionedLayout() && r.SnapshotsApplied() > 0
	})
	r := tc.stores[behind].GetReplica(testRangeID)
	waitFor(t, func() bool {
		v, ok, err := r.Get(ctx, []byte("k29"), ReadOptions{Mode: tidekvpb.ReadMode_ANY})
		return err == nil && ok && string(v) == "new"
	})
	for k, v := range want {
		if got, ok, err := r.Get(ctx, []byte(k), ReadOptions{Mode: tidekvpb.ReadMode_ANY}); err != nil || !ok || string(got) != v {
			t.Fatalf("%s on the caught-up replica: %q, %v, %v; want %q", k, got, ok, err, v)
		}
	}
	lo, hi := keys.DataSpan(testRangeID, nil, nil)
	if n, err := tc.engines[behind].ApproximateSize(lo, hi); err != nil || n != 0 {
		t.Fatalf("the caught-up replica keeps %d bytes of unversioned data (%v)", n, err)
	}
}

// liveOf is the user bytes of the keys in kvs from from on.
func liveOf(kvs map[string]string, from string) uint64 {
	var n uint64
	for k, v := range kvs {
		if k >= from {
			n += uint64(len(k) + len(v))
		}
	}
	return n
}

// Ranges in different layouts do not merge (their data would mix); once
// both are versioned they do.
func TestMergeWaitsForOneLayout(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("a", "1")
	tc.put("x", "2")
	tc.splitAt(t, "m", 3)
	tc.migrate(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	frozen := tc.freezeEverywhere(t, 3, testRangeID)
	if _, err := tc.leader(testRangeID).Merge(ctx, frozen); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "layouts differ") {
		t.Fatalf("merge across layouts: %v", err)
	}
	// Unfrozen, the left range migrates too, and the merge goes through.
	if _, err := tc.leader(3).Unfreeze(ctx); err != nil {
		t.Fatal(err)
	}
	tc.migrate(t, testRangeID)
	frozen = tc.freezeEverywhere(t, 3, testRangeID)
	if _, err := tc.leader(testRangeID).Merge(ctx, frozen); err != nil {
		t.Fatalf("merge of two versioned ranges: %v", err)
	}
	tc.checkValues(t, map[string]string{"a": "1", "x": "2"})
}

// BenchmarkMigrateLayout64MiB times one MigrateLayout apply of a range at
// Θmax (64 MiB of 100- or 1000-byte values, flushed to SSTs) on Pebble
// with the production options, its batch's commit included: the node's
// scheduler is held that long (docs/transactions.md step 2). Run with
// -benchtime 1x.
func BenchmarkMigrateLayout64MiB(b *testing.B) {
	const size = 64 << 20
	for _, valueLen := range []int{100, 1000} {
		b.Run(fmt.Sprintf("value=%d", valueLen), func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				b.StopTimer()
				eng := loadUnversioned(b, size, valueLen)
				r := bareReplica(eng, "", "", false)
				b.StartTimer()
				ab := newApplyBatch(eng)
				if res, _ := r.applyMigrateLocked(ab, at(100, &tidekvpb.RaftCommand{MigrateLayout: &tidekvpb.MigrateLayoutCommand{}})); res.err != nil {
					b.Fatal(res.err)
				}
				if err := ab.commit(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				eng.Close()
			}
		})
	}
}

// loadUnversioned opens a Pebble engine holding about size bytes of
// unversioned user data in valueLen-byte values, flushed to SSTs.
func loadUnversioned(b *testing.B, size, valueLen int) storage.Engine {
	val := make([]byte, valueLen)
	return loadPebble(b, func(w storage.Writer) error {
		for i := range size / (valueLen + 16) {
			if err := w.Set(keys.DataKey(testRangeID, fmt.Appendf(nil, "user%011d", i)), val); err != nil {
				return err
			}
		}
		return nil
	})
}

// loadPebble opens a Pebble engine with the production options holding
// what fill writes, flushed to SSTs.
func loadPebble(b *testing.B, fill func(storage.Writer) error) storage.Engine {
	eng, err := storage.OpenPebble(b.TempDir(), storage.DefaultPebbleOptions())
	if err != nil {
		b.Fatal(err)
	}
	batch := eng.NewBatch()
	defer batch.Close()
	if err := fill(batch); err != nil {
		b.Fatal(err)
	}
	if err := batch.Commit(false); err != nil {
		b.Fatal(err)
	}
	if err := eng.(interface{ Flush() error }).Flush(); err != nil {
		b.Fatal(err)
	}
	return eng
}

// Reads that run while the migration applies see the data in one layout
// or the other, never neither: each waits out the commit that moves it.
func TestReadsDuringMigration(t *testing.T) {
	tc := newTestCluster(t, 3)
	for i := range 300 {
		tc.put(fmt.Sprintf("k%03d", i), "v")
	}
	ld := tc.leader(testRangeID)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stop := make(chan struct{})
	errs := make(chan error, 2)
	for _, read := range []func() error{
		func() error {
			if _, ok, err := ld.Get(ctx, []byte("k150"), ReadOptions{Mode: tidekvpb.ReadMode_ANY}); err != nil || !ok {
				return fmt.Errorf("get: found %v, %v", ok, err)
			}
			return nil
		},
		func() error {
			if kvs, _, err := ld.Scan(ctx, nil, nil, 1000, 1<<20, ReadOptions{Mode: tidekvpb.ReadMode_ANY}); err != nil || len(kvs) != 300 {
				return fmt.Errorf("scan: %d keys, %v", len(kvs), err)
			}
			return nil
		},
	} {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if err := read(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	tc.migrate(t, testRangeID)
	close(stop)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestBootstrapAtVersion: a new cluster starts at the log version its
// first node bootstraps it at, in the meta range and the store (after a
// restart too); at LogVersionMVCC or later its user ranges begin on the
// versioned layout, with nothing to migrate, and the meta range keeps the
// unversioned one. Below, they begin unversioned and migrate later.
func TestBootstrapAtVersion(t *testing.T) {
	for _, v := range []uint32{LogVersionDirectory, LogVersionMVCC, LatestLogVersion} {
		cfg := DefaultConfig()
		cfg.SnapshotDir = t.TempDir()
		eng := storage.NewMem()
		one := []*tidekvpb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1, Type: tidekvpb.ReplicaType_VOTER}}
		descs := []*tidekvpb.RangeDescriptor{
			{RangeId: keys.MetaRangeID, Replicas: one, Generation: 1, NextReplicaId: 2},
			{RangeId: keys.FirstUserRangeID, Replicas: one, Generation: 1, NextReplicaId: 2},
		}
		b := eng.NewBatch()
		if err := BootstrapMeta(b, &tidekvpb.NodeDescriptor{NodeId: 1, MaxLogVersion: v}, descs, keys.FirstUserRangeID+1, v); err != nil || b.Commit(true) != nil {
			t.Fatal(err)
		}
		b.Close()
		s, err := NewStore(cfg, 1, eng, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Bootstrap(descs, v); err != nil {
			t.Fatal(err)
		}
		s.Stop()
		if s, err = NewStore(cfg, 1, eng, nil, nil); err != nil {
			t.Fatal(err)
		}
		meta, err := ReadMetaLogVersion(eng)
		if err != nil || meta != v || s.LogVersion() != v {
			t.Errorf("bootstrapped at %d: the meta range records %d (%v), the restarted store proposes at %d", v, meta, err, s.LogVersion())
		}
		if s.GetReplica(keys.MetaRangeID).VersionedLayout() || s.GetReplica(keys.FirstUserRangeID).VersionedLayout() != (v >= LogVersionMVCC) {
			t.Errorf("bootstrapped at %d: meta range versioned %v, user range versioned %v", v,
				s.GetReplica(keys.MetaRangeID).VersionedLayout(), s.GetReplica(keys.FirstUserRangeID).VersionedLayout())
		}
		s.Stop()
	}
	cfg := DefaultConfig()
	cfg.SnapshotDir, cfg.MaxLogVersion = t.TempDir(), LogVersionDirectory
	s, err := NewStore(cfg, 1, storage.NewMem(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.Bootstrap(nil, LogVersionMVCC); err == nil {
		t.Fatal("a binary that applies log version 3 bootstrapped a cluster at 4")
	}
}
