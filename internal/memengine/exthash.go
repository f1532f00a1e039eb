package memengine

import "bytes"

// maxDirDepth caps the extendible-hashing directory at 2^24 slots (128 MiB
// of pointers). A bucket that is full when the directory is at its cap takes
// the record anyway and grows past its size; with random hashes that needs
// billions of keys, but keys whose hashes share many low bits (or an
// adversary's guesses at the seed) must not double the directory without
// bound.
const maxDirDepth = 24

// exthash is extendible hashing: a directory of 2^depth slots, indexed by
// the low depth bits of a key's hash, points at buckets of at most records
// entries. A bucket of local depth d holds exactly the keys whose hashes
// end in its d-bit pattern, and 2^(depth-d) slots point at it. A full
// bucket splits in two on its next bit, doubling the directory first when
// its local depth already equals the directory's. Point reads cost one
// hash, one slot and a scan of one bucket; a span, though, can be anywhere,
// so reading one visits every bucket.
//
// Buddies whose records fit in half a bucket merge back, and the directory
// halves when no bucket needs its last bit, so moving half the keys away
// also shrinks what the next scan visits. Merging at half rather than at a
// full bucket keeps a key going and coming at the boundary from splitting
// and merging the same pair each time.
type exthash struct {
	dir   []*bucket
	depth uint // global depth: len(dir) == 1<<depth
	// atDepth counts the buckets whose local depth equals depth; while
	// there are none, the directory's halves are copies of each other.
	atDepth int
	records int
	hasher  hasher
	n       int
	// maxDepth is maxDirDepth, lowered by tests to reach the cap.
	maxDepth uint
}

type bucket struct {
	depth uint // local depth
	// hashes[i] is entries[i].hash: a lookup scans this array, which is
	// contiguous, rather than following a pointer to every entry.
	hashes  []uint64
	entries []*entry
}

func newBucket(depth uint, records int) *bucket {
	return &bucket{depth: depth, hashes: make([]uint64, 0, records), entries: make([]*entry, 0, records)}
}

func (b *bucket) add(e *entry) {
	b.hashes = append(b.hashes, e.hash)
	b.entries = append(b.entries, e)
}

func newExtHash(records int, h hasher) *exthash {
	return &exthash{
		dir:      []*bucket{newBucket(0, records)},
		atDepth:  1,
		records:  records,
		hasher:   h,
		maxDepth: maxDirDepth,
	}
}

func (t *exthash) ordered() bool { return false }

func (t *exthash) bounded(lower, upper []byte) bool { return t.hasher.bounded(lower, upper) }

func (t *exthash) slot(h uint64) uint64 { return h & (1<<t.depth - 1) }

func (t *exthash) get(key []byte) *entry {
	h := t.hasher.hash(key)
	// Comparing the stored hash first makes a bucket scan cheap per record,
	// but it is still a scan: the cost grows with records per bucket.
	b := t.dir[t.slot(h)]
	for i, bh := range b.hashes {
		if bh == h && bytes.Equal(b.entries[i].key, key) {
			return b.entries[i]
		}
	}
	return nil
}

func (t *exthash) insert(e *entry) {
	e.hash = t.hasher.hash(e.key)
	b := t.dir[t.slot(e.hash)]
	for len(b.entries) >= t.records && t.split(b, e.hash) {
		b = t.dir[t.slot(e.hash)]
	}
	b.add(e)
	t.n++
}

// split divides b, the bucket of hash h, on its next hash bit, doubling the
// directory if b already uses all of its bits. It reports false when b
// cannot split: the directory is at its cap, or b's keys and h are one hash,
// which no bit can separate.
func (t *exthash) split(b *bucket, h uint64) bool {
	if b.depth == t.depth && t.depth == t.maxDepth || allHash(b.hashes, h) {
		return false
	}
	if b.depth == t.depth {
		t.dir = append(t.dir, t.dir...)
		t.depth++
		t.atDepth = 0
	}
	bit := uint64(1) << b.depth
	b.depth++
	sibling := newBucket(b.depth, t.records)
	entries := b.entries
	b.hashes, b.entries = b.hashes[:0], b.entries[:0]
	for _, e := range entries {
		if e.hash&bit != 0 {
			sibling.add(e)
		} else {
			b.add(e) // writes only slots already read
		}
	}
	clear(entries[len(b.entries):])
	t.repoint(h&(bit-1)|bit, bit<<1, sibling)
	if b.depth == t.depth {
		t.atDepth += 2
	}
	return true
}

func allHash(hashes []uint64, h uint64) bool {
	for _, x := range hashes {
		if x != h {
			return false
		}
	}
	return true
}

// repoint points every slot whose low bits are pattern (the slots from
// pattern on, stride apart) at b.
func (t *exthash) repoint(pattern, stride uint64, b *bucket) {
	for i := pattern; i < uint64(len(t.dir)); i += stride {
		t.dir[i] = b
	}
}

func (t *exthash) remove(e *entry) {
	b := t.dir[t.slot(e.hash)]
	for i, x := range b.entries {
		if x == e {
			last := len(b.entries) - 1
			b.hashes[i], b.entries[i] = b.hashes[last], b.entries[last]
			b.entries[last] = nil
			b.hashes, b.entries = b.hashes[:last], b.entries[:last]
			t.n--
			t.mergeUp(b, e.hash)
			return
		}
	}
	panic("memengine: removing a key the hash table does not hold")
}

// mergeUp merges b, the bucket of hash h, with its buddy (the bucket
// differing only in b's last bit) while both fit in half a bucket, then
// halves the directory while no bucket uses its last bit.
func (t *exthash) mergeUp(b *bucket, h uint64) {
	for b.depth > 0 {
		bit := uint64(1) << (b.depth - 1)
		buddy := t.dir[(h&(bit<<1-1))^bit]
		if buddy.depth != b.depth || len(b.entries)+len(buddy.entries) > t.records/2 {
			break
		}
		kept, gone := b, buddy
		if h&bit != 0 {
			kept, gone = buddy, b
		}
		kept.hashes = append(kept.hashes, gone.hashes...)
		kept.entries = append(kept.entries, gone.entries...)
		if kept.depth == t.depth {
			t.atDepth -= 2
		}
		kept.depth--
		t.repoint(h&(bit-1)|bit, bit<<1, kept)
		b = kept
	}
	for t.depth > 0 && t.atDepth == 0 {
		t.halve()
	}
}

// halve drops the directory's upper half, a copy of the lower one, into a
// new array so the old one can be freed.
func (t *exthash) halve() {
	t.dir = append([]*bucket(nil), t.dir[:len(t.dir)/2]...)
	t.depth--
	t.atDepth = 0
	for _, b := range t.dir {
		// A bucket at full depth has exactly one slot.
		if b.depth == t.depth {
			t.atDepth++
		}
	}
}

// scan visits every bucket once (at its first slot, its pattern) and every
// record in it: with hashed keys there is no telling where a span's keys
// are, unless they are all of one group (Grouping), whose bucket it reads.
func (t *exthash) scan(lower, upper []byte, fn func(*entry) bool) {
	if h, ok := t.hasher.oneGroup(lower, upper); ok {
		scanGroup(t.dir[t.slot(h)].entries, h, lower, upper, fn)
		return
	}
	for i, b := range t.dir {
		if uint64(i) >= 1<<b.depth {
			continue // not b's first slot
		}
		if !scanEntries(b.entries, lower, upper, fn) {
			return
		}
	}
}
