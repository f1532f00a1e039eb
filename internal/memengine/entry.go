package memengine

// entry is one key and the versions of it that some reader can still see,
// oldest first. Snapshots and iterators read at the sequence number of the
// last batch committed when they opened; a write made while one is open
// adds a version instead of replacing, and the older one goes once no
// reader needs it. With no reader open an entry holds exactly one live
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
// drops what no reader at oldest or later can see.
func (e *entry) write(v version, oldest uint64) {
	if last := len(e.versions) - 1; e.versions[last].seq == v.seq {
		e.versions[last] = v
	} else {
		e.versions = append(e.versions, v)
	}
	e.prune(oldest)
}

// prune drops the versions no reader at oldest or later can see: those
// older than the one a reader at oldest sees, and deletions with nothing
// older to hide, which read as absence anyway. It may leave none (dead).
func (e *entry) prune(oldest uint64) {
	from := 0
	for i := len(e.versions) - 1; i >= 0; i-- {
		if e.versions[i].seq <= oldest {
			from = i
			break
		}
	}
	for from < len(e.versions) && e.versions[from].value == nil {
		from++
	}
	n := copy(e.versions, e.versions[from:])
	clear(e.versions[n:])
	e.versions = e.versions[:n]
}

// dead reports that no reader can see the key: it leaves the index.
func (e *entry) dead() bool { return len(e.versions) == 0 }

// settled reports that the entry holds one live version, nothing to collect.
func (e *entry) settled() bool {
	return len(e.versions) == 1 && e.versions[0].value != nil
}
