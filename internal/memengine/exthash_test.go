package memengine

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// check verifies the extendible-hashing invariants: a directory of
// 2^depth slots; each bucket of local depth d at most depth, pointed at by
// exactly the 2^(depth-d) slots that end in its pattern and holding only
// keys whose hashes end in it; no bucket over its size unless it cannot
// split; atDepth and the count right.
func (t *exthash) check() error {
	if len(t.dir) != 1<<t.depth {
		return fmt.Errorf("directory of %d slots at depth %d", len(t.dir), t.depth)
	}
	n, atDepth := 0, 0
	for i, b := range t.dir {
		if b.depth > t.depth {
			return fmt.Errorf("bucket depth %d over the directory's %d", b.depth, t.depth)
		}
		pattern := uint64(i) & (1<<b.depth - 1)
		if t.dir[pattern] != b {
			return fmt.Errorf("slot %d and its pattern %d point at different buckets", i, pattern)
		}
		if uint64(i) != pattern {
			continue // count each bucket once, at its first slot
		}
		slots := 0
		for _, c := range t.dir {
			if c == b {
				slots++
			}
		}
		if slots != 1<<(t.depth-b.depth) {
			return fmt.Errorf("bucket %b/%d has %d slots, want %d", pattern, b.depth, slots, 1<<(t.depth-b.depth))
		}
		if len(b.hashes) != len(b.entries) {
			return fmt.Errorf("bucket holds %d hashes for %d records", len(b.hashes), len(b.entries))
		}
		for j, e := range b.entries {
			if b.hashes[j] != e.hash {
				return fmt.Errorf("bucket's hash %x for a record of hash %x", b.hashes[j], e.hash)
			}
			if e.hash&(1<<b.depth-1) != pattern {
				return fmt.Errorf("hash %x in bucket %b/%d", e.hash, pattern, b.depth)
			}
		}
		if len(b.entries) > t.records && t.depth < t.maxDepth && !allHash(b.hashes, b.hashes[0]) {
			return fmt.Errorf("bucket of %d records, size %d", len(b.entries), t.records)
		}
		if b.depth == t.depth {
			atDepth++
		}
		n += len(b.entries)
	}
	if atDepth != t.atDepth {
		return fmt.Errorf("%d buckets at full depth, atDepth says %d", atDepth, t.atDepth)
	}
	if n != t.n {
		return fmt.Errorf("buckets hold %d records, count says %d", n, t.n)
	}
	return nil
}

// hkey is a key whose hash under keyHash is h, so a test picks which
// bucket each key lands in.
func hkey(h uint64) []byte { return binary.BigEndian.AppendUint64(nil, h) }

func keyHash(key []byte) uint64 { return binary.BigEndian.Uint64(key) }

func mustCheckEH(t *testing.T, x *exthash) {
	t.Helper()
	if err := x.check(); err != nil {
		t.Fatal(err)
	}
}

func TestExtHashSplitsAtItsBucketSizeAndDoubles(t *testing.T) {
	x := newExtHash(8, hasher{raw: keyHash})
	// Eight even hashes fill the one bucket without a split.
	for i := range 8 {
		insertKey(x, hkey(uint64(2*i)))
	}
	mustCheckEH(t, x)
	if x.depth != 0 || len(x.dir) != 1 {
		t.Fatalf("split before the bucket held more than 8: depth %d", x.depth)
	}
	// The ninth: splitting on bit 0 moves nothing (all even), so the bucket
	// splits again on bit 1 (0, 4, 8, 12, 16 stay; 2, 6, 10, 14 go), and the
	// directory doubles twice.
	insertKey(x, hkey(16))
	mustCheckEH(t, x)
	if x.depth != 2 {
		t.Fatalf("directory depth %d, want 2", x.depth)
	}
	b00, b1, b10 := x.dir[0], x.dir[1], x.dir[2]
	if x.dir[3] != b1 || b1.depth != 1 || len(b1.entries) != 0 {
		t.Fatal("the odd bucket is not one depth-1 bucket behind slots 1 and 3")
	}
	if b00.depth != 2 || len(b00.entries) != 5 || b10.depth != 2 || len(b10.entries) != 4 {
		t.Fatalf("buckets 00 and 10 hold %d and %d records, want 5 and 4", len(b00.entries), len(b10.entries))
	}
	for i := range 9 {
		if x.get(hkey(uint64(2*i))) == nil {
			t.Fatalf("key %d lost in the split", 2*i)
		}
	}
	// Removing down to a few records merges buddies and halves the
	// directory back to one bucket.
	for i := range 7 {
		x.remove(x.get(hkey(uint64(2 * i))))
		mustCheckEH(t, x)
	}
	if x.depth != 0 || len(x.dir[0].entries) != 2 {
		t.Fatalf("after removals: depth %d, want one bucket of 2", x.depth)
	}
}

func TestExtHashBucketSizeSetsTheDirectory(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, records := range []int{100, 300, 500} {
		x := newExtHash(records, hasher{raw: keyHash})
		for range 20000 {
			insertKey(x, hkey(rng.Uint64())) // random hashes, like a real hash's
		}
		mustCheckEH(t, x)
		buckets := 0
		for i, b := range x.dir {
			if uint64(i) < 1<<b.depth {
				buckets++
			}
		}
		// A bucket splits only when full, so buckets are at least about
		// half full on average (ln 2 ≈ 0.69 for random hashes).
		if fill := float64(20000) / float64(buckets*records); fill < 0.5 || fill > 1 {
			t.Errorf("%d records a bucket: %d buckets, fill %.2f", records, buckets, fill)
		}
		t.Logf("%d records a bucket: directory depth %d, %d buckets", records, x.depth, buckets)
	}
}

func TestExtHashCannotSplitOneHash(t *testing.T) {
	// Keys that share a whole hash overflow their bucket rather than split.
	x := newExtHash(8, hasher{raw: func([]byte) uint64 { return 42 }})
	for i := range 20 {
		insertKey(x, ikey(i))
	}
	mustCheckEH(t, x)
	if x.depth != 0 || len(x.dir[0].entries) != 20 {
		t.Fatalf("depth %d; want one overflowing bucket", x.depth)
	}
	for i := range 20 {
		if x.get(ikey(i)) == nil {
			t.Fatalf("key %d not found among equal hashes", i)
		}
	}
}

func TestExtHashDirectoryStopsAtItsCap(t *testing.T) {
	// Hashes differing only above bit 3 cannot be told apart under a cap of
	// depth 3: the bucket overflows instead of doubling the directory.
	x := newExtHash(8, hasher{raw: keyHash})
	x.maxDepth = 3
	for i := range 20 {
		insertKey(x, hkey(uint64(i)<<3))
	}
	mustCheckEH(t, x)
	if x.depth != 3 || len(x.dir[0].entries) != 20 {
		t.Fatalf("depth %d, bucket 0 holds %d; want depth 3 and all 20", x.depth, len(x.dir[0].entries))
	}
}
