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
}

func newIndex(c Config) index {
	hash := newHash()
	switch c.Index {
	case ExtendibleHash:
		return newExtHash(c.BucketRecords, hash)
	case CountingBloom:
		return newCBFIndex(uint64(c.CBFCounters), c.CBFHashes, hash)
	default:
		return newBTree(btreeOrder)
	}
}

// newHash returns a key hash with a random seed: keys chosen to collide
// under a known hash could otherwise force bucket splits until the
// directory hits its cap, or fill the Bloom filter's counters.
func newHash() func([]byte) uint64 {
	seed := maphash.MakeSeed()
	return func(key []byte) uint64 { return maphash.Bytes(seed, key) }
}

// inSpan reports whether key is in [lower, upper), a nil upper unbounded.
func inSpan(key, lower, upper []byte) bool {
	return bytes.Compare(key, lower) >= 0 && (upper == nil || bytes.Compare(key, upper) < 0)
}
