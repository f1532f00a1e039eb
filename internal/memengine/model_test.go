package memengine

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

// stressIndexes are each index at sizes small enough that a few hundred keys
// split and merge B+-tree nodes and hash buckets at every level, and
// saturate Bloom filter counters.
func stressIndexes() map[string]index {
	return map[string]index{
		"btree":   newBTree(4),
		"exthash": newExtHash(8, newHasher(nil)),
		"cbf":     newCBFIndex(256, 4, newHasher(nil)),
	}
}

func checkIndex(x index) error {
	switch x := x.(type) {
	case *btree:
		return x.check()
	case *exthash:
		return x.check()
	}
	return nil
}

// TestIndexesAgreeWithASortedModel drives each index with thousands of
// random inserts and removals and checks every key's presence (no false
// negatives from a saturated filter) and that range extraction returns
// exactly the keys of a span, in order (sorted afterwards for the
// unordered indexes, in the sweep itself for the B+-tree).
func TestIndexesAgreeWithASortedModel(t *testing.T) {
	for name, x := range stressIndexes() {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			model := map[string]bool{}
			key := func() []byte { return fmt.Appendf(nil, "k%03d", rng.IntN(600)) }
			for step := range 6000 {
				k := key()
				switch e := x.get(k); {
				case e != nil != model[string(k)]:
					t.Fatalf("step %d: get(%q) found=%v, model %v", step, k, e != nil, model[string(k)])
				case e == nil:
					insertKey(x, k)
					model[string(k)] = true
				case rng.IntN(3) > 0: // remove a little less often than insert, so the index grows
					x.remove(e)
					delete(model, string(k))
				}
				if step%100 != 0 {
					continue
				}
				if err := checkIndex(x); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				lower, upper := key(), key()
				if bytes.Compare(lower, upper) > 0 {
					lower, upper = upper, lower
				}
				if rng.IntN(4) == 0 {
					upper = nil
				}
				got := collect(x, lower, upper)
				if !x.ordered() {
					slices.SortFunc(got, func(a, b *entry) int { return bytes.Compare(a.key, b.key) })
				}
				var want []string
				for k := range model {
					if inSpan([]byte(k), lower, upper) {
						want = append(want, k)
					}
				}
				slices.Sort(want)
				if gotKeys := keysOfEntries(got); !slices.Equal(gotKeys, want) {
					t.Fatalf("step %d: extract [%q, %q) = %q, want %q", step, lower, upper, gotKeys, want)
				}
			}
		})
	}
}

func keysOfEntries(es []*entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, string(e.key))
	}
	return out
}

func newTestEngine(t testing.TB, idx Index) *Engine {
	t.Helper()
	e, err := New(testConfig(idx))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// liveEntries counts what the index holds, dead versions included.
func liveEntries(e *Engine) int {
	return len(collect(e.idx, nil, nil))
}

// TestVersionsGoWhenReadersClose: writes made while a snapshot is open keep
// the versions it reads, and the next commit after it closes drops them, so
// an engine read through snapshots does not grow with its write history.
func TestVersionsGoWhenReadersClose(t *testing.T) {
	for _, idx := range []Index{BTree, ExtendibleHash, CountingBloom} {
		t.Run(string(idx), func(t *testing.T) {
			e := newTestEngine(t, idx)
			var kvs []enginetest.KV
			for i := range 200 {
				kvs = append(kvs, enginetest.KV{K: string(ikey(i)), V: "old"})
			}
			enginetest.SetAll(t, e, kvs...)
			snap := e.NewSnapshot()
			it, err := e.NewIter(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			enginetest.Apply(t, e, enginetest.DelRange(string(ikey(0)), string(ikey(100))))
			for i := 100; i < 200; i++ {
				enginetest.Apply(t, e, enginetest.Set(string(ikey(i)), "new"))
			}
			if n := liveEntries(e); n != 200 || len(e.garbage) != 200 {
				t.Fatalf("with readers open: %d entries, %d queued; want all 200 of each", n, len(e.garbage))
			}
			enginetest.WantGet(t, snap, string(ikey(5)), "old", true)
			enginetest.WantGet(t, snap, string(ikey(150)), "old", true)
			if n := len(enginetest.Scan(t, snap, nil, nil)); n != 200 {
				t.Fatalf("snapshot scans %d keys, want 200", n)
			}
			n := 0
			for ok := it.First(); ok; ok = it.Next() {
				if string(it.Value()) != "old" {
					t.Fatalf("iterator opened before the writes reads %q at %q", it.Value(), it.Key())
				}
				n++
			}
			if n != 200 {
				t.Fatalf("iterator read %d keys, want 200", n)
			}

			_ = it.Close()
			_ = snap.Close()
			enginetest.Apply(t, e, enginetest.Set("z", "1"))
			if n := liveEntries(e); n != 101 || len(e.garbage) != 0 {
				t.Fatalf("after the readers closed: %d entries, %d queued; want 101 and none", n, len(e.garbage))
			}
			for _, en := range collect(e.idx, nil, nil) {
				if !en.settled() {
					t.Fatalf("%q still holds %d versions", en.key, len(en.versions))
				}
			}
		})
	}
}

// TestNoReaderNoVersions: with no reader open a write replaces in place and
// a deletion removes the key, so nothing is queued.
func TestNoReaderNoVersions(t *testing.T) {
	e := newTestEngine(t, BTree)
	enginetest.Apply(t, e, enginetest.Set("a", "1"), enginetest.Set("b", "1"))
	enginetest.Apply(t, e, enginetest.Set("a", "2"), enginetest.Del("b"))
	if n := liveEntries(e); n != 1 || len(e.garbage) != 0 || len(e.idx.get([]byte("a")).versions) != 1 {
		t.Fatalf("%d entries, %d queued", n, len(e.garbage))
	}
}

// TestRangesMoveBetweenMemoryEngines ships a span as one SST file from each
// memory engine (and storage's MemEngine) to each other one, replacing what
// the destination held there.
func TestRangesMoveBetweenMemoryEngines(t *testing.T) {
	open := map[string]func() storage.Engine{"mem": func() storage.Engine { return storage.NewMem() }}
	for _, idx := range []Index{BTree, ExtendibleHash, CountingBloom} {
		open[string(idx)] = func() storage.Engine { return newTestEngine(t, idx) }
	}
	var kvs []enginetest.KV
	for i := range 300 {
		kvs = append(kvs, enginetest.KV{K: string(ikey(i)), V: fmt.Sprint("v", i)})
	}
	for _, from := range slices.Sorted(maps.Keys(open)) {
		for _, to := range slices.Sorted(maps.Keys(open)) {
			src, dst := open[from](), open[to]()
			enginetest.SetAll(t, src, kvs...)
			enginetest.SetAll(t, dst, enginetest.KV{K: string(ikey(0)), V: "keep"}, enginetest.KV{K: string(ikey(150)), V: "doomed"}, enginetest.KV{K: "z", V: "keep"})
			lo, hi := ikey(100), ikey(200)
			path := filepath.Join(t.TempDir(), "range.sst")
			stats, err := src.WriteSST(src, lo, hi, path)
			if err != nil || stats.Keys != 100 {
				t.Fatalf("%s: WriteSST: %+v, %v", from, stats, err)
			}
			if err := dst.IngestSST(path, lo, hi); err != nil {
				t.Fatalf("%s to %s: %v", from, to, err)
			}
			want := append([]enginetest.KV{{K: string(ikey(0)), V: "keep"}}, kvs[100:200]...)
			want = append(want, enginetest.KV{K: "z", V: "keep"})
			if got := enginetest.Scan(t, dst, nil, nil); !slices.Equal(got, want) {
				t.Fatalf("%s to %s: got %d pairs, want %d", from, to, len(got), len(want))
			}
		}
	}
}

// TestPruneKeepsWhatEachReaderSees pins down which versions survive: the
// newest, and for each reader the newest version no newer than it.
func TestPruneKeepsWhatEachReaderSees(t *testing.T) {
	v := func(seq uint64, val string) version {
		if val == "-" {
			return version{seq: seq} // a deletion
		}
		return version{seq, []byte(val)}
	}
	for _, tc := range []struct {
		versions []version
		pins     []uint64
		want     []uint64 // seqs kept
	}{
		{[]version{v(1, "a"), v(2, "b")}, nil, []uint64{2}},
		{[]version{v(1, "a"), v(2, "-")}, nil, nil},                                          // dead
		{[]version{v(1, "a"), v(3, "b"), v(5, "c"), v(7, "d")}, []uint64{2}, []uint64{1, 7}}, // 3 and 5: no one
		{[]version{v(1, "a"), v(3, "b"), v(5, "c"), v(7, "d")}, []uint64{3, 6}, []uint64{3, 5, 7}},
		{[]version{v(1, "a"), v(5, "-"), v(8, "b")}, []uint64{6}, []uint64{8}}, // the reader at 6 sees no key, as with none
		{[]version{v(1, "a"), v(5, "-"), v(8, "b")}, []uint64{1, 6}, []uint64{1, 5, 8}},
		{[]version{v(4, "a")}, []uint64{2}, []uint64{4}}, // born after the reader: it sees nothing
	} {
		e := &entry{versions: slices.Clone(tc.versions)}
		e.prune(tc.pins)
		var got []uint64
		for _, x := range e.versions {
			got = append(got, x.seq)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v with readers at %v: kept %v, want %v", tc.versions, tc.pins, got, tc.want)
		}
	}
}

// TestAHotKeyUnderASnapshotKeepsTwoVersions: a key written a thousand times
// while one snapshot is open keeps the snapshot's version and the newest,
// not every one in between.
func TestAHotKeyUnderASnapshotKeepsTwoVersions(t *testing.T) {
	e := newTestEngine(t, BTree)
	enginetest.Apply(t, e, enginetest.Set("hot", "0"))
	snap := e.NewSnapshot()
	defer snap.Close()
	for i := range 1000 {
		enginetest.Apply(t, e, enginetest.Set("hot", fmt.Sprint(i+1)))
	}
	if n := len(e.idx.get([]byte("hot")).versions); n != 2 {
		t.Fatalf("%d versions kept, want 2", n)
	}
	enginetest.WantGet(t, snap, "hot", "0", true)
	enginetest.WantGet(t, e, "hot", "1000", true)
}

// TestCollectionIsAmortisedUnderALongReader: while a long snapshot stays
// open, a short one closing does not make the next commit walk the whole
// garbage list; the versions only it saw go within len(garbage)/4 batches.
func TestCollectionIsAmortisedUnderALongReader(t *testing.T) {
	e := newTestEngine(t, BTree)
	long := e.NewSnapshot()
	defer long.Close()
	setAll := func(v string) {
		var kvs []enginetest.KV
		for i := range 400 {
			kvs = append(kvs, enginetest.KV{K: string(ikey(i)), V: v})
		}
		enginetest.SetAll(t, e, kvs...)
	}
	setAll("a")
	short := e.NewSnapshot()
	setAll("b") // every key keeps "a" for short
	_ = short.Close()
	versions := func() int { return len(e.idx.get(ikey(7)).versions) }

	enginetest.Apply(t, e, enginetest.Set("x", "1"))
	if n := versions(); n != 2 {
		t.Fatalf("one commit after the short reader closed: %d versions, want the collection deferred (2)", n)
	}
	for range 400 / 4 {
		enginetest.Apply(t, e, enginetest.Set("x", "1"))
	}
	if n := versions(); n != 1 {
		t.Fatalf("%d versions after %d batches, want the short reader's collected", n, 400/4+1)
	}
	enginetest.WantGet(t, long, string(ikey(7)), "", false)
}
