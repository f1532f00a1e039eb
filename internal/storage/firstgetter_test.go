package storage_test

import (
	"bytes"
	"errors"
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
