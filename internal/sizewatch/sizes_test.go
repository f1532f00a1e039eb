package sizewatch

import (
	"context"
	"strings"
	"testing"

	"github.com/tidekv/tidekv/internal/raftstore"
)

type fakeSized struct {
	id, written, snaps uint64
	data               map[string]string // the range's live keys and values
}

func (f *fakeSized) RangeID() uint64          { return f.id }
func (f *fakeSized) WrittenBytes() uint64     { return f.written }
func (f *fakeSized) SnapshotsApplied() uint64 { return f.snaps }

// DataSize stores what it holds live (no old versions).
func (f *fakeSized) DataSize(context.Context) (raftstore.DataSize, error) {
	var n uint64
	for k, v := range f.data {
		n += uint64(len(k) + len(v))
	}
	return raftstore.DataSize{Live: n, Stored: n, Keys: uint64(len(f.data))}, nil
}

// The size is an exact count of live bytes plus the bytes written since,
// counted again once those could have added recountAfter bytes, when the
// span changes, or when a snapshot replaced the data.
func TestRangeSizeEstimate(t *testing.T) {
	r := &fakeSized{id: 2, data: map[string]string{}}
	put := func(k, v string) { r.data[k] = v }
	put("b", "123456") // 7
	put("c", "12")     // 3
	var rs sizes
	size := func(gen uint64) uint64 {
		n, err := rs.size(context.Background(), r, gen, 100)
		if err != nil {
			t.Fatal(err)
		}
		return n.Stored
	}
	if n := size(1); n != 10 {
		t.Fatalf("first count %d, want the 10 live bytes", n)
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
	// With a large bound, a range is counted again once the writes could
	// have added a quarter of its size (the bound for a small range).
	big := strings.Repeat("x", 100<<10)
	put("g", big)
	r.written += 200 << 10
	if n, _ := rs.size(context.Background(), r, 2, 1<<30); n.Stored != 28+1+100<<10 {
		t.Fatalf("after a big write: %d, want the exact %d", n.Stored, 28+1+100<<10)
	}
	put("h", strings.Repeat("y", 20<<10))
	r.written += 20 << 10
	if n, _ := rs.size(context.Background(), r, 2, 1<<30); n.Stored != 28+1+100<<10+20<<10 {
		t.Fatalf("after 20 KiB written: %d, want %d (under a quarter of the range: no recount)", n.Stored, 28+1+100<<10+20<<10)
	}
	r.written += 10 << 10
	want := uint64(28 + 1 + 100<<10 + 1 + 20<<10)
	if n, _ := rs.size(context.Background(), r, 2, 1<<30); n.Stored != want {
		t.Fatalf("after 30 KiB written: %d, want the exact %d (over a quarter of the 100 KiB counted)", n.Stored, want)
	}
	rs.forget(map[uint64]bool{})
	if len(rs.m) != 0 {
		t.Fatal("forget kept a range that is no longer local")
	}
}
