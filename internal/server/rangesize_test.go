package server

import (
	"context"
	"testing"

	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

type fakeSized struct {
	id, written, snaps uint64
	eng                storage.Reader
	span               [2][]byte // the range's unversioned engine span
}

func (f *fakeSized) RangeID() uint64          { return f.id }
func (f *fakeSized) WrittenBytes() uint64     { return f.written }
func (f *fakeSized) SnapshotsApplied() uint64 { return f.snaps }

func (f *fakeSized) LiveBytes(context.Context) (uint64, error) {
	it, err := f.eng.NewIter(f.span[0], f.span[1])
	if err != nil {
		return 0, err
	}
	var n uint64
	for ok := it.First(); ok; ok = it.Next() {
		n += uint64(len(keys.UserKey(it.Key())) + len(it.Value()))
	}
	return n, it.Close()
}

// The size is an exact count of live bytes plus the bytes written since,
// counted again once those could have added recountAfter bytes, when the
// span changes, or when a snapshot replaced the data.
func TestRangeSizeEstimate(t *testing.T) {
	eng := storage.NewMem()
	put := func(k, v string) {
		b := eng.NewBatch()
		defer b.Close()
		if err := b.Set(keys.DataKey(2, []byte(k)), []byte(v)); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "1234")   // 5 bytes, outside [b, m)
	put("b", "123456") // 7
	put("c", "12")     // 3
	put("z", "x")      // outside
	lo, hi := keys.DataSpan(2, []byte("b"), []byte("m"))
	r := &fakeSized{id: 2, eng: eng, span: [2][]byte{lo, hi}}
	var rs rangeSizes
	size := func(gen uint64) uint64 {
		n, err := rs.size(context.Background(), r, gen, 100)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := size(1); n != 10 {
		t.Fatalf("first count %d, want the 10 live bytes in [b, m)", n)
	}
	// An overwrite of c (3 → 3 bytes) applied: counted as growth, no scan.
	put("c", "34")
	r.written += 3
	if n := size(1); n != 13 {
		t.Fatalf("after 3 bytes written: %d, want 10 + 3 (an upper bound, no recount)", n)
	}
	// Writes that could have added recountAfter bytes: counted again.
	put("d", "123456789")
	r.written += 100
	if n := size(1); n != 20 {
		t.Fatalf("after 103 bytes written: %d, want the exact 20", n)
	}
	// A new span (a split): counted again at once.
	put("e", "1")
	if n := size(2); n != 22 {
		t.Fatalf("new generation: %d, want the exact 22", n)
	}
	// A snapshot installed at the same generation replaced the data: counted again.
	put("f", "12345")
	r.snaps++
	if n := size(2); n != 28 {
		t.Fatalf("after a snapshot: %d, want the exact 28", n)
	}
	rs.forget(map[uint64]bool{})
	if len(rs.m) != 0 {
		t.Fatal("forget kept a range that is no longer local")
	}
}
