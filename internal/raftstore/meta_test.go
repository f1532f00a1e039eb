package raftstore

import (
	"slices"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

func TestDirectoryUpdate(t *testing.T) {
	desc := func(id, gen uint64, start, end string) *tidekvpb.RangeDescriptor {
		return &tidekvpb.RangeDescriptor{RangeId: id, Generation: gen, StartKey: []byte(start), EndKey: []byte(end)}
	}
	// Range 2 ["", m) at generation 5 and range 4 [m, "") at 7 merge into
	// range 2 ["", "") at generation 8.
	merged := desc(2, 8, "", "")
	right := desc(4, 7, "m", "")
	cases := []struct {
		name    string
		all     []*tidekvpb.RangeDescriptor
		d       *tidekvpb.RangeDescriptor
		version uint32
		drop    []uint64
		store   bool
	}{
		{"new range", nil, right, LogVersionDirectory, nil, true},
		{"newer generation of the same range", []*tidekvpb.RangeDescriptor{desc(4, 6, "m", "")}, right, LogVersionDirectory, nil, true},
		{"older generation of the same range", []*tidekvpb.RangeDescriptor{desc(4, 8, "m", "")}, right, LogVersionDirectory, nil, false},
		{"a merge drops the range it took", []*tidekvpb.RangeDescriptor{desc(2, 5, "", "m"), right}, merged, LogVersionDirectory, []uint64{4}, true},
		// The merged range's report came first, so the right-hand range's
		// own late report finds a newer layout over its span.
		{"late report of a range merged away", []*tidekvpb.RangeDescriptor{merged}, right, LogVersionDirectory, nil, false},
		{"late report of a range merged away, version 2", []*tidekvpb.RangeDescriptor{merged}, right, LogVersionShared, nil, true},
		{"a split's parent drops nothing newer", []*tidekvpb.RangeDescriptor{desc(2, 9, "", "g"), desc(5, 9, "g", "")}, merged, LogVersionDirectory, nil, false},
		// A stored report clears a leftover older descriptor it overlaps.
		{"same report clears a leftover", []*tidekvpb.RangeDescriptor{merged, right}, merged, LogVersionDirectory, []uint64{4}, false},
		// Version 2 stops at the same range's entry, keeping what it had
		// dropped before it (the directory is scanned in range ID order).
		{"the meta range overlaps no user range", []*tidekvpb.RangeDescriptor{desc(1, 9, "", "")}, right, LogVersionDirectory, nil, true},
		{"nor does a user range the meta range", []*tidekvpb.RangeDescriptor{right}, desc(1, 9, "", ""), LogVersionDirectory, nil, true},
		{"version 2 took the meta range as overlapping", []*tidekvpb.RangeDescriptor{desc(1, 2, "", "")}, right, LogVersionShared, []uint64{1}, true},
		{"version 2 stops at its own entry", []*tidekvpb.RangeDescriptor{desc(1, 1, "a", "b"), merged, right}, desc(2, 8, "", ""), LogVersionShared, []uint64{1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			drop, store := DirectoryUpdate(c.all, c.d, c.version)
			if !slices.Equal(drop, c.drop) || store != c.store {
				t.Fatalf("DirectoryUpdate = drop %v store %v, want drop %v store %v", drop, store, c.drop, c.store)
			}
		})
	}
	if !Superseded([]*tidekvpb.RangeDescriptor{merged}, right) || Superseded([]*tidekvpb.RangeDescriptor{right}, merged) {
		t.Fatal("Superseded must hold for the older of two overlapping descriptors only")
	}
}

// Key space creations get numbers from 1 in apply order; a name that
// exists creates nothing and answers 0, however the proposals raced.
func TestApplyCreateKeySpace(t *testing.T) {
	eng := storage.NewMem()
	meta := bareReplica(eng, "", "", false)
	meta.rangeID = keys.MetaRangeID
	create := func(name string) uint64 {
		t.Helper()
		ab := newApplyBatch(eng)
		defer ab.b.Close()
		res, err := meta.applyMetaLocked(ab, &tidekvpb.MetaCommand{CreateKeyspace: &tidekvpb.KeySpaceRecord{Name: name, Mode: "hashed"}})
		if err != nil || res.err != nil {
			t.Fatalf("create %s: %v, %v", name, err, res.err)
		}
		if err := ab.commit(); err != nil {
			t.Fatal(err)
		}
		return res.metaID
	}
	for _, c := range []struct {
		name string
		want uint64
	}{{"a", 1}, {"b", 2}, {"a", 0}, {"c", 3}} {
		if got := create(c.name); got != c.want {
			t.Fatalf("create %s = %d, want %d", c.name, got, c.want)
		}
	}
	recs, err := ReadMetaKeySpaces(eng)
	if err != nil || len(recs) != 3 {
		t.Fatalf("stored %v, %v", recs, err)
	}
	for i, r := range recs {
		if r.GetId() != uint32(i+1) || r.GetName() != string(rune('a'+i)) || r.GetMode() != "hashed" {
			t.Errorf("record %d: %v", i, r)
		}
	}
}

// The controller state is one value: absent until stored, then replaced
// whole by each store.
func TestApplyPutControllerState(t *testing.T) {
	eng := storage.NewMem()
	meta := bareReplica(eng, "", "", false)
	meta.rangeID = keys.MetaRangeID
	if v, err := ReadMetaControllerState(eng); v != nil || err != nil {
		t.Fatalf("before any store: %q, %v", v, err)
	}
	for _, v := range []string{`{"version":1,"a":1}`, `{"version":1}`} {
		ab := newApplyBatch(eng)
		res, err := meta.applyMetaLocked(ab, &tidekvpb.MetaCommand{PutControllerState: []byte(v)})
		if err != nil || res.err != nil {
			t.Fatalf("store %s: %v, %v", v, err, res.err)
		}
		if err := ab.commit(); err != nil {
			t.Fatal(err)
		}
		ab.b.Close()
		if got, err := ReadMetaControllerState(eng); string(got) != v || err != nil {
			t.Fatalf("stored %q, read %q, %v", v, got, err)
		}
	}
}
