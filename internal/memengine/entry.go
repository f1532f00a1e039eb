package memengine

import "slices"

// entry is one key and the versions of it that some reader can still see,
// oldest first. Snapshots and iterators read at the sequence number of the
// last batch committed when they opened; a write made while one is open
// adds a version instead of replacing, and an older one goes as soon as no
// open reader sees it. With no reader open an entry holds exactly one live
// version, so the common case costs one value per key.
//
// Keys and values are never mutated after they are stored, which is what
// lets readers keep references to them without copying under the lock.
type entry struct {
	key []byte
	// hash is the key's hash, kept by the hashed indexes (extendible
	// hashing, the Bloom filter) so splits and removals need not rehash;
	// zero in a B+-tree.
	hash     uint64
	versions []version
	// queued: on the engine's list of entries holding versions to collect.
	queued bool
	// removed: taken out of the index; a queued entry may outlive that.
	removed bool
	// first backs versions until a second version is kept, saving an
	// allocation per key.
	first [1]version
}

// version is the key's value as of batch seq; a nil value is a deletion
// (stored values are never nil, even when empty).
type version struct {
	seq   uint64
	value []byte
}

func newEntry(key []byte, v version) *entry {
	e := &entry{key: key}
	e.first[0] = v
	e.versions = e.first[:1:1]
	return e
}

// latest returns the current value.
func (e *entry) latest() ([]byte, bool) {
	v := e.versions[len(e.versions)-1].value
	return v, v != nil
}

// size is what the entry counts for in ApproximateSize: its key's and
// latest value's lengths, or 0 when deleted.
func (e *entry) size() int {
	if v, ok := e.latest(); ok {
		return len(e.key) + len(v)
	}
	return 0
}

// at returns the value a reader at seq sees: the newest version no newer
// than seq.
func (e *entry) at(seq uint64) ([]byte, bool) {
	for i := len(e.versions) - 1; i >= 0; i-- {
		if v := e.versions[i]; v.seq <= seq {
			return v.value, v.value != nil
		}
	}
	return nil, false
}

// write makes v the newest version (replacing one of the same batch) and
// drops what no reader at pins can see.
func (e *entry) write(v version, pins []uint64) {
	if last := len(e.versions) - 1; e.versions[last].seq == v.seq {
		e.versions[last] = v
	} else {
		e.versions = append(e.versions, v)
	}
	e.prune(pins)
}

// prune keeps the newest version and, for each sequence number in pins
// (ascending, those open readers read at), the version a reader there sees;
// no one sees the others. A deletion left oldest then hides nothing, reading
// as absence like no version at all, so it goes too. It may leave none
// (dead).
func (e *entry) prune(pins []uint64) {
	kept := e.versions[:0]
	for i, v := range e.versions {
		// A reader at p sees v if v.seq <= p < the next version's seq.
		if i == len(e.versions)-1 || seenAt(pins, v.seq, e.versions[i+1].seq) {
			kept = append(kept, v) // kept is never ahead of i: reads come first
		}
	}
	from := 0
	for from < len(kept) && kept[from].value == nil {
		from++
	}
	n := copy(e.versions, kept[from:])
	clear(e.versions[n:])
	e.versions = e.versions[:n]
}

// seenAt reports whether some pin is in [from, to).
func seenAt(pins []uint64, from, to uint64) bool {
	i, _ := slices.BinarySearch(pins, from)
	return i < len(pins) && pins[i] < to
}

// dead reports that no reader can see the key: it leaves the index.
func (e *entry) dead() bool { return len(e.versions) == 0 }

// settled reports that the entry holds one live version, nothing to collect.
func (e *entry) settled() bool {
	return len(e.versions) == 1 && e.versions[0].value != nil
}
