package memengine

import "bytes"

// countingBloom is a counting Bloom filter: m 4-bit counters, each key
// adding one to k of them. A key whose counters are all non-zero may be
// present; one with a zero counter certainly is not. Counting (rather than
// setting bits) is what allows removal.
//
// A counter that reaches 15 saturates: it stays at 15 for good, through
// later adds and removes alike, since it no longer knows how many keys
// share it, and counting down from a wrong number could reach zero while
// one of them is still present, a false negative. Saturation trades that
// for a counter that answers "maybe" forever, a false positive; with the
// default sizing a counter needs 15 keys landing on it, which is rare.
type countingBloom struct {
	counters []byte // two counters a byte, the even one in the low nibble
	m        uint64
	k        int
}

const counterMax = 15

func newCountingBloom(m uint64, k int) countingBloom {
	return countingBloom{counters: make([]byte, (m+1)/2), m: m, k: k}
}

// position returns the counter of a key's j-th hash, by double hashing
// (the two halves of one 64-bit hash, g_j = h1 + j·h2), which is as good as
// k independent hashes for a Bloom filter (Kirsch and Mitzenmacher). The
// odd h2 keeps the k positions from collapsing into one.
func (f *countingBloom) position(h uint64, j int) uint64 {
	g := uint32(h) + uint32(j)*(uint32(h>>32)|1)
	return (uint64(g) * f.m) >> 32 // g scaled into [0, m) without a division
}

func (f *countingBloom) counter(i uint64) byte {
	return f.counters[i/2] >> ((i & 1) * 4) & 0xF
}

func (f *countingBloom) setCounter(i uint64, c byte) {
	shift := (i & 1) * 4
	f.counters[i/2] = f.counters[i/2]&^(0xF<<shift) | c<<shift
}

func (f *countingBloom) add(h uint64) {
	for j := range f.k {
		if i := f.position(h, j); f.counter(i) < counterMax {
			f.setCounter(i, f.counter(i)+1)
		}
	}
}

// remove undoes an add of h. Removing what was never added is a bug in
// the caller that would make the filter lie, so it panics rather than wrap.
func (f *countingBloom) remove(h uint64) {
	for j := range f.k {
		switch i := f.position(h, j); f.counter(i) {
		case counterMax: // saturated: see the type's comment
		case 0:
			panic("memengine: removing a key the Bloom filter never counted")
		default:
			f.setCounter(i, f.counter(i)-1)
		}
	}
}

func (f *countingBloom) mayContain(h uint64) bool {
	for j := range f.k {
		if f.counter(f.position(h, j)) == 0 {
			return false
		}
	}
	return true
}

// cbfIndex is a counting Bloom filter in front of an unordered store, which
// it spares a probe for every key it rules out (a cache's misses). The
// store is a Go map from hash to the entries with that hash (a full 64-bit
// collision is possible, if unlikely), so it holds no second copy of the
// keys.
//
// A span has no place in either structure. The paper's migration walked its
// integer key domain from start to end, probing the filter for each
// possible key; byte-string keys have no such domain to walk, so the only
// candidates are the store's own keys, each tested against the span. The
// filter would answer "maybe" for every one of those, so scan does not ask
// it; where the filter does work in a migration is the removal of the keys
// moved away, which counts each one down.
type cbfIndex struct {
	filter countingBloom
	store  map[uint64][]*entry
	hasher hasher
	n      int
}

func newCBFIndex(counters uint64, hashes int, h hasher) *cbfIndex {
	return &cbfIndex{
		filter: newCountingBloom(counters, hashes),
		store:  map[uint64][]*entry{},
		hasher: h,
	}
}

func (x *cbfIndex) ordered() bool { return false }

func (x *cbfIndex) bounded(lower, upper []byte) bool { return x.hasher.bounded(lower, upper) }

func (x *cbfIndex) get(key []byte) *entry {
	h := x.hasher.hash(key)
	if !x.filter.mayContain(h) {
		return nil
	}
	for _, e := range x.store[h] {
		if bytes.Equal(e.key, key) {
			return e
		}
	}
	return nil
}

func (x *cbfIndex) insert(e *entry) {
	e.hash = x.hasher.hash(e.key)
	x.store[e.hash] = append(x.store[e.hash], e)
	x.filter.add(e.hash)
	x.n++
}

func (x *cbfIndex) remove(e *entry) {
	same := x.store[e.hash]
	for i, s := range same {
		if s != e {
			continue
		}
		if len(same) == 1 {
			delete(x.store, e.hash)
		} else {
			x.store[e.hash] = append(same[:i:i], same[i+1:]...)
		}
		x.filter.remove(e.hash)
		x.n--
		return
	}
	panic("memengine: removing a key the store does not hold")
}

// scan reads the store slot of the span's group when it lies inside one
// (Grouping); otherwise every key, as above.
func (x *cbfIndex) scan(lower, upper []byte, fn func(*entry) bool) {
	if h, ok := x.hasher.oneGroup(lower, upper); ok {
		if x.filter.mayContain(h) {
			scanGroup(x.store[h], h, lower, upper, fn)
		}
		return
	}
	for _, same := range x.store {
		if !scanEntries(same, lower, upper, fn) {
			return
		}
	}
}
