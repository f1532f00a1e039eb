package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

// firstByIter is GetFirst's meaning, read through NewIter.
func firstByIter(t *testing.T, r storage.Reader, lower, upper []byte) (k, v []byte, found bool) {
	t.Helper()
	it, err := r.NewIter(lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.First() {
		return nil, nil, false
	}
	return bytes.Clone(it.Key()), bytes.Clone(it.Value()), true
}

// Pebble's engine and snapshots answer GetFirst as a fresh iterator's
// First would, over memtable and SST data, and a snapshot does not see
// later writes.
func TestPebbleGetFirstAgreesWithIterators(t *testing.T) {
	e := enginetest.Pebble.Open(t)
	rng := rand.New(rand.NewPCG(5, 6))
	key := func() []byte { return []byte{byte('a' + rng.IntN(6)), byte('a' + rng.IntN(6))} }
	for i := range 200 {
		enginetest.SetAll(t, e, enginetest.KV{K: string(key()), V: string(rune('A' + i%26))})
		if i == 100 {
			enginetest.Pebble.Flush(t, e)
		}
	}
	snap := e.NewSnapshot()
	defer snap.Close()
	enginetest.Apply(t, e, enginetest.DelRange("a", "c"))
	for _, r := range []storage.Reader{e, snap} {
		fg := r.(storage.FirstGetter)
		for range 500 {
			lower, upper := key()[:rng.IntN(3)], key()
			if rng.IntN(4) == 0 {
				upper = nil
			}
			if upper != nil && bytes.Compare(lower, upper) > 0 {
				lower, upper = upper, lower
			}
			dst := []byte("dst")
			k, v, found, err := fg.GetFirst(lower, upper, dst)
			if err != nil {
				t.Fatal(err)
			}
			wk, wv, wfound := firstByIter(t, r, lower, upper)
			if found != wfound || (found && (!bytes.Equal(k, append([]byte("dst"), wk...)) || !bytes.Equal(v, wv))) {
				t.Fatalf("GetFirst(%q, %q) = %q, %q, %v; an iterator finds %q, %q, %v", lower, upper, k, v, found, wk, wv, wfound)
			}
		}
	}
	fg := e.(storage.FirstGetter)
	if _, _, _, err := fg.GetFirst([]byte("b"), []byte("a"), nil); !errors.Is(err, storage.ErrInvalidSpan) {
		t.Fatalf("GetFirst of an inverted span: err = %v", err)
	}
	if _, _, found, err := fg.GetFirst([]byte("b"), []byte("b"), nil); found || err != nil {
		t.Fatalf("GetFirst of an empty span: %v, %v", found, err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := snap.(storage.FirstGetter).GetFirst(nil, nil, nil); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("GetFirst on a closed snapshot: err = %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := fg.GetFirst(nil, nil, nil); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("GetFirst on a closed engine: err = %v", err)
	}
}

// A Pebble snapshot's point reads share one iterator, which Close closes,
// and readers at once on one snapshot (one of them on an iterator of its
// own) still get each span's first key.
func TestPebbleSnapshotGetFirstSharesAnIterator(t *testing.T) {
	e := enginetest.Pebble.Open(t)
	defer e.Close()
	for _, k := range []string{"a1", "a2", "b1", "b2", "c1"} {
		enginetest.SetAll(t, e, enginetest.KV{K: k, V: "v" + k})
	}
	enginetest.Pebble.Flush(t, e)
	snap := e.NewSnapshot()
	fg := snap.(storage.FirstGetter)
	if storage.SnapshotFirstIter(snap) != nil {
		t.Fatal("a new snapshot holds an iterator")
	}
	var shared any
	for _, span := range [][2]string{{"b", "c"}, {"a", "b"}, {"a2", "a3"}, {"c", "d"}, {"d", "e"}} {
		k, v, found, err := fg.GetFirst([]byte(span[0]), []byte(span[1]), nil)
		wk, wv, wfound := firstByIter(t, snap, []byte(span[0]), []byte(span[1]))
		if err != nil || found != wfound || !bytes.Equal(k, wk) || !bytes.Equal(v, wv) {
			t.Fatalf("GetFirst(%q, %q) = %q, %q, %v, %v; want %q, %q, %v", span[0], span[1], k, v, found, err, wk, wv, wfound)
		}
		it := storage.SnapshotFirstIter(snap)
		if it == nil || (shared != nil && shared != any(it)) {
			t.Fatalf("after GetFirst(%q, %q) the snapshot's iterator is %p, before %v", span[0], span[1], it, shared)
		}
		shared = it
	}
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range 200 {
				lo := []byte{byte('a' + (g+i)%4)}
				k, _, found, err := fg.GetFirst(lo, nil, nil)
				want := lo[0] <= 'c'
				if err == nil && (found != want || (found && k[0] != lo[0])) {
					err = fmt.Errorf("GetFirst(%q, nil) = %q, %v", lo, k, found)
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if storage.SnapshotFirstIter(snap) != nil {
		t.Fatal("Close left the snapshot's iterator open")
	}
}

// A snapshot's point reads of a hash's marker and its ten fields
// (versioned keys, one SST), as a Redis HMGET's BatchGet does them.
func BenchmarkPebbleSnapshotGetFirstHash(b *testing.B) {
	e := enginetest.Pebble.Open(b)
	defer e.Close()
	const hashes, fields = 2000, 10
	key := func(h, f int) []byte { return fmt.Appendf(nil, "usertable/user%06d\x00\x01field%d", h, f) }
	for h := range hashes {
		kvs := []enginetest.KV{{K: string(key(h, -1)), V: "hash"}}
		for f := range fields {
			kvs = append(kvs, enginetest.KV{K: string(key(h, f)), V: string(bytes.Repeat([]byte{'x'}, 100))})
		}
		enginetest.SetAll(b, e, kvs...)
	}
	enginetest.Pebble.Flush(b, e)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h := i * 7919 % hashes
		snap := e.NewSnapshot()
		fg := snap.(storage.FirstGetter)
		for f := -1; f < fields; f++ {
			k := key(h, f)
			if _, _, found, err := fg.GetFirst(k, append(k, 0), nil); err != nil || !found {
				b.Fatalf("%q: %v, %v", k, found, err)
			}
		}
		snap.Close()
	}
}
