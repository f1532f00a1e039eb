package storage

import (
	"bytes"
	"hash/maphash"
	"sync/atomic"

	"github.com/google/btree"
)

// SizeSampleEvery is the sampling rate of a SizeTally: about one key in
// this many is in its sample.
const SizeSampleEvery = 64

// SizeWalkKeys is how many keys of a span ApproximateSize reads before it
// turns to the sample: a span holding at most this many is counted exactly.
const SizeWalkKeys = 1024

// SizeTally answers the memory engines' ApproximateSize without reading
// every key: the node's heartbeat asks for the size of each of its
// replicas every second, and a walk over every key under the engine's lock
// took most of the CPU of a node holding 100,000 keys, and its Raft quorum
// with it (issue 37). It keeps the running total of key and value bytes,
// and a sample of the keys, each kept with its size: those whose hash under
// a random seed is 0 modulo SizeSampleEvery, about one in
// SizeSampleEvery. The seed is random so that keys cannot be chosen to be
// sampled or not.
//
// The engine calls Change on every write, under its write lock, and Size
// under its read lock: a SizeTally has no lock of its own.
type SizeTally struct {
	total  uint64
	seed   maphash.Seed
	sample *btree.BTreeG[sizeSample]
	// visits counts the keys and samples Size read, so tests can bound
	// its cost by what it reads rather than by time.
	visits atomic.Uint64
}

type sizeSample struct {
	key  []byte
	size uint64
}

// NewSizeTally returns the tally of an empty engine.
func NewSizeTally() *SizeTally {
	return &SizeTally{seed: maphash.MakeSeed(), sample: btree.NewG(memDegree, func(a, b sizeSample) bool {
		return bytes.Compare(a.key, b.key) < 0
	})}
}

// Change records that key's stored size went from before to after, a size
// being the key's length plus its value's, or 0 for a key not stored. The
// tally may keep key: the engine must not change it afterwards.
func (t *SizeTally) Change(key []byte, before, after int) {
	if before == after {
		return
	}
	t.total += uint64(after) - uint64(before) // modular: a shrink subtracts
	if maphash.Bytes(t.seed, key)%SizeSampleEvery != 0 {
		return
	}
	if after == 0 {
		t.sample.Delete(sizeSample{key: key})
		return
	}
	t.sample.ReplaceOrInsert(sizeSample{key: key, size: uint64(after)})
}

// Size is ApproximateSize over an engine whose keys t tallies (the bounds
// already checked). The whole engine (an empty lower bound, no upper bound)
// is the running total, exact and O(1). Otherwise walk, when not nil, reads
// the span's keys in any order, giving fn each one's size until fn returns
// false; it must cost only what it reads. A span holding at most
// SizeWalkKeys keys is counted exactly so. A larger one, or any span when
// walk is nil (a hashed index, which can only find a span's keys by reading
// all of them), is estimated from the sample: SizeSampleEvery times the
// sampled sizes in the span, at least what the walk counted. That reads
// about a SizeSampleEvery-th of the span's keys, and its relative error
// for a span of n keys of like sizes is about sqrt(SizeSampleEvery/n): 25%
// at 1,024 keys, 2.5% at 100,000. A span without keys always reads 0.
func (t *SizeTally) Size(lower, upper []byte, walk func(fn func(size int) bool)) uint64 {
	if len(lower) == 0 && upper == nil {
		return t.total
	}
	var counted uint64
	if walk != nil {
		keys, whole := 0, true
		walk(func(size int) bool {
			if keys == SizeWalkKeys {
				whole = false
				return false
			}
			keys++
			counted += uint64(size)
			return true
		})
		t.visits.Add(uint64(keys))
		if whole {
			return counted
		}
	}
	var sampled, samples uint64
	t.sample.AscendGreaterOrEqual(sizeSample{key: lower}, func(s sizeSample) bool {
		if upper != nil && bytes.Compare(s.key, upper) >= 0 {
			return false
		}
		sampled += s.size
		samples++
		return true
	})
	t.visits.Add(samples)
	return max(counted, sampled*SizeSampleEvery)
}

// Visits is how many keys and samples Size has read.
func (t *SizeTally) Visits() uint64 { return t.visits.Load() }
