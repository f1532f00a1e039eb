package raftstore

import (
	"errors"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/hlc"
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
	if it, err := eng.NewIter(lo, hi); err != nil || it.First() {
		t.Fatalf("unversioned keys left after the migration (%v)", err)
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
