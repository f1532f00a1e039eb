package sizewatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/raftstore"
)

type fakeSized struct {
	id, written, snaps, spans uint64
	data                      map[string]string // the range's live keys and values
	counts                    int               // DataSize calls
}

func (f *fakeSized) RangeID() uint64          { return f.id }
func (f *fakeSized) WrittenBytes() uint64     { return f.written }
func (f *fakeSized) SnapshotsApplied() uint64 { return f.snaps }
func (f *fakeSized) SpanChanges() uint64      { return f.spans }

// DataSize stores what it holds live (no old versions).
func (f *fakeSized) DataSize(context.Context) (raftstore.DataSize, error) {
	f.counts++
	var n uint64
	for k, v := range f.data {
		n += uint64(len(k) + len(v))
	}
	return raftstore.DataSize{Live: n, Stored: n, Keys: uint64(len(f.data))}, nil
}

// The size is an exact count of live bytes plus the bytes written since,
// counted again once those could have added recountAfter bytes (at the
// split line, here 0), when the span changes, or when a snapshot replaced
// the data.
func TestRangeSizeEstimate(t *testing.T) {
	r := &fakeSized{id: 2, data: map[string]string{}}
	put := func(k, v string) { r.data[k] = v }
	put("b", "123456") // 7
	put("c", "12")     // 3
	var rs sizes
	size := func() uint64 {
		n, err := rs.size(context.Background(), r, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n.Stored
	}
	if n := size(); n != 10 {
		t.Fatalf("first count %d, want the 10 live bytes", n)
	}
	// An overwrite of c (3 → 3 bytes) applied: counted as growth, no scan.
	put("c", "34")
	r.written += 3
	if n := size(); n != 13 {
		t.Fatalf("after 3 bytes written: %d, want 10 + 3 (an upper bound, no recount)", n)
	}
	// Writes that could have added recountAfter bytes: counted again.
	put("d", "123456789")
	r.written += 100
	if n := size(); n != 20 {
		t.Fatalf("after 103 bytes written: %d, want the exact 20", n)
	}
	// A new span (a split): counted again at once.
	put("e", "1")
	r.spans++
	if n := size(); n != 22 {
		t.Fatalf("new span: %d, want the exact 22", n)
	}
	// A snapshot installed over the same span replaced the data: counted again.
	put("f", "12345")
	r.snaps++
	if n := size(); n != 28 {
		t.Fatalf("after a snapshot: %d, want the exact 28", n)
	}
	// With a large bound, a range is counted again once the writes could
	// have added a quarter of its size (the bound for a small range).
	big := strings.Repeat("x", 100<<10)
	put("g", big)
	r.written += 200 << 10
	if n, _ := rs.size(context.Background(), r, 1<<30, 0); n.Stored != 28+1+100<<10 {
		t.Fatalf("after a big write: %d, want the exact %d", n.Stored, 28+1+100<<10)
	}
	put("h", strings.Repeat("y", 20<<10))
	r.written += 20 << 10
	if n, _ := rs.size(context.Background(), r, 1<<30, 0); n.Stored != 28+1+100<<10+20<<10 {
		t.Fatalf("after 20 KiB written: %d, want %d (under a quarter of the range: no recount)", n.Stored, 28+1+100<<10+20<<10)
	}
	r.written += 10 << 10
	want := uint64(28 + 1 + 100<<10 + 1 + 20<<10)
	if n, _ := rs.size(context.Background(), r, 1<<30, 0); n.Stored != want {
		t.Fatalf("after 30 KiB written: %d, want the exact %d (over a quarter of the 100 KiB counted)", n.Stored, want)
	}
	rs.forget(map[uint64]bool{})
	if len(rs.m) != 0 {
		t.Fatal("forget kept a range that is no longer local")
	}
}

// A range's count follows its span, not its descriptor's generation: a
// replica change (a learner added, a voter moved) bumps the generation but
// moves none of the replica's counters (SpanChanges counts no replica
// change: raftstore's TestMergeTakesOverTheFrozenNeighbour), so the count
// stands, with the writes since added; it was counted afresh at every
// generation, a full scan of each range a rebalancing touched. Another
// replica of the range (removed from the node and added back) counts
// afresh, though its counters, started anew, read as the old one's did; so
// does a split, and a split merged back to the same span (the writes the
// right-hand side took meanwhile are in none of this replica's counters).
func TestCountFollowsSpan(t *testing.T) {
	r := &fakeSized{id: 2, snaps: 1, data: map[string]string{"b": "123456"}} // 7 bytes
	var rs sizes
	size := func(r *fakeSized, what string, want uint64, counts int) {
		t.Helper()
		n, err := rs.size(context.Background(), r, 1<<20, 0)
		if err != nil || n.Stored != want || r.counts != counts {
			t.Fatalf("%s: %d bytes (%v) after %d counts; want %d bytes after %d", what, n.Stored, err, r.counts, want, counts)
		}
	}
	size(r, "first", 7, 1)
	// A learner added, then promoted: two generations, one span.
	r.written += 4
	size(r, "after two replica changes and 4 bytes written", 11, 1)
	// Removed and added back by a snapshot, as it first came, and written
	// to as much since.
	r = &fakeSized{id: 2, snaps: 1, written: 4, data: map[string]string{"b": "123456", "y": "1"}}
	size(r, "the replica added back", 9, 1)
	// A split: the range keeps b, its right-hand side takes the rest.
	delete(r.data, "y")
	r.spans++
	size(r, "after a split", 7, 2)
	// The right-hand side takes a write, then is merged back: the span is
	// the one counted before the split, its data is not.
	r.data["x"], r.data["y"] = "12", "1"
	r.spans++
	size(r, "after a merge back to the span counted", 12, 3)
}

// Below the split line a range is not scanned again for the writes since
// its count until recountGap has passed; once the bound with them reaches
// the line, it is counted as often as before: whenever the writes since
// could have added a quarter of it. A steady write load to a growing range
// costs no scan per quarter of its size.
func TestNoScanBelowTheLine(t *testing.T) {
	now := time.Unix(1000, 0)
	rs := sizes{now: func() time.Time { return now }}
	r := &fakeSized{id: 2, data: map[string]string{}}
	const kib, line = 1 << 10, 1000 << 10
	size := func(what string, want uint64, counts int) {
		t.Helper()
		n, err := rs.size(context.Background(), r, 1<<30, line)
		if err != nil || n.Stored != want || r.counts != counts {
			t.Fatalf("%s: %d bytes (%v) after %d counts; want %d bytes after %d", what, n.Stored, err, r.counts, want, counts)
		}
	}
	put := func(k string, n int) { // a new key of n bytes in all
		r.data[k] = strings.Repeat("v", n-len(k))
		r.written += uint64(n)
	}
	put("a", 100*kib)
	size("first", 100*kib, 1)
	// Six rounds a second apart, each after more than a quarter of the
	// range was written: no count.
	for i, k := range []string{"b", "c", "d", "e", "f", "g"} {
		put(k, 50*kib)
		now = now.Add(time.Second)
		size("growing below the line", uint64(150+50*i)*kib, 1)
	}
	// recountGap after the count: counted again.
	now = now.Add(recountGap)
	size("recountGap after the count", 400*kib, 2)
	// Up to the line within the gap: counted at once.
	put("h", 600*kib)
	size("at the line", 1000*kib, 3)
	put("i", 100*kib)
	size("at the line, 100 KiB since the count", 1100*kib, 3)
	put("j", 200*kib)
	size("at the line, over a quarter of the range since the count", 1300*kib, 4)
}
