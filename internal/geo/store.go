package geo

import (
	"hash/fnv"
	"maps"
)

// Store is one DC's copy of a geo key space's data, split into partitions
// by a hash of the key. Each partition is a map owned, during an
// execution, by that partition's goroutine alone. Not safe for concurrent
// use otherwise.
type Store struct {
	parts []map[string][]byte
}

// NewStore returns an empty store of n partitions.
func NewStore(n int) *Store {
	s := &Store{parts: make([]map[string][]byte, n)}
	for i := range s.parts {
		s.parts[i] = map[string][]byte{}
	}
	return s
}

func (s *Store) part(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(s.parts)))
}

// Get returns key's value and whether it is there.
func (s *Store) Get(key string) ([]byte, bool) {
	v, ok := s.parts[s.part(key)][key]
	return v, ok
}

// Clone returns a copy; values are shared, never modified in place.
func (s *Store) Clone() *Store {
	c := &Store{parts: make([]map[string][]byte, len(s.parts))}
	for i, p := range s.parts {
		c.parts[i] = maps.Clone(p)
	}
	return c
}

// Apply writes a committed result's writes.
func (s *Store) Apply(r *Result) {
	if !r.Committed {
		return
	}
	for _, w := range r.Writes {
		s.applyOne(s.parts[s.part(w.Key)], w)
	}
}

func (s *Store) applyOne(p map[string][]byte, w KV) {
	if w.Found {
		p[w.Key] = w.Value
	} else {
		delete(p, w.Key)
	}
}

// All returns every key and value (tests and checks).
func (s *Store) All() map[string][]byte {
	out := map[string][]byte{}
	for _, p := range s.parts {
		maps.Copy(out, p)
	}
	return out
}
