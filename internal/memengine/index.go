package memengine

import (
	"bytes"
	"hash/maphash"
)

// index is where an engine keeps its entries: a B+-tree, an extendible hash
// table or a counting Bloom filter over a store. The engine serialises
// writers and lets readers in concurrently, so an index needs no locking of
// its own but must not change on a read.
type index interface {
	// get returns the entry for key, or nil.
	get(key []byte) *entry
	// insert adds e, whose key is not in the index.
	insert(e *entry)
	// remove takes out e, which is in the index.
	remove(e *entry)
	// scan calls fn on the entries with keys in [lower, upper) (a nil upper
	// is unbounded) until fn returns false: the index's range extraction.
	// An ordered index visits them in ascending key order and only them; an
	// unordered one visits them in its own order after looking at every
	// entry it holds. fn must not change the index.
	scan(lower, upper []byte, fn func(*entry) bool)
	// ordered reports whether scan is ordered and costs only what it visits.
	ordered() bool
	// bounded reports whether scan of [lower, upper) costs only what it
	// visits: always for an ordered index, for an unordered one when the
	// span lies in one group.
	bounded(lower, upper []byte) bool
}

func newIndex(c Config) index {
	h := newHasher(c.Group)
	switch c.Index {
	case ExtendibleHash:
		return newExtHash(c.BucketRecords, h)
	case CountingBloom:
		return newCBFIndex(uint64(c.CBFCounters), c.CBFHashes, h)
	default:
		return newBTree(btreeOrder)
	}
}

// hasher places keys in an unordered index: by the hash of their group.
type hasher struct {
	raw   func([]byte) uint64
	group Grouping // nil: every key is its own group
}

// newHasher hashes with a random seed: keys chosen to collide under a known
// hash could otherwise force bucket splits until the directory hits its
// cap, or fill the Bloom filter's counters.
func newHasher(g Grouping) hasher {
	seed := maphash.MakeSeed()
	return hasher{raw: func(b []byte) uint64 { return maphash.Bytes(seed, b) }, group: g}
}

func (h hasher) hash(key []byte) uint64 {
	if h.group != nil {
		key = key[:h.group.GroupLen(key)]
	}
	return h.raw(key)
}

// oneGroup reports whether [lower, upper) lies inside one group, and that
// group's hash: the span's keys are all in one bucket or store slot.
func (h hasher) oneGroup(lower, upper []byte) (uint64, bool) {
	if h.group == nil || !h.group.Within(lower, upper) {
		return 0, false
	}
	return h.hash(lower), true
}

// bounded is index.bounded for the hashed indexes, which read a span
// inside one group in its bucket or slot only.
func (h hasher) bounded(lower, upper []byte) bool {
	_, ok := h.oneGroup(lower, upper)
	return ok
}

// inSpan reports whether key is in [lower, upper), a nil upper unbounded.
func inSpan(key, lower, upper []byte) bool {
	return bytes.Compare(key, lower) >= 0 && (upper == nil || bytes.Compare(key, upper) < 0)
}

// scanEntries calls fn on the entries in [lower, upper) until it returns
// false, and reports whether it never did.
func scanEntries(es []*entry, lower, upper []byte, fn func(*entry) bool) bool {
	for _, e := range es {
		if inSpan(e.key, lower, upper) && !fn(e) {
			return false
		}
	}
	return true
}

// scanGroup is scanEntries over the entries of the group hashed h, which
// it tells from the others of their bucket or slot by hash before
// comparing keys.
func scanGroup(es []*entry, h uint64, lower, upper []byte, fn func(*entry) bool) {
	for _, e := range es {
		if e.hash == h && inSpan(e.key, lower, upper) && !fn(e) {
			return
		}
	}
}
