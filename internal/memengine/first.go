package memengine

import (
	"bytes"

	"github.com/tidekv/tidekv/internal/storage"
)

var (
	_ storage.FirstGetter = (*Engine)(nil)
	_ storage.FirstGetter = (*snapshot)(nil)
)

// GetFirst answers a read TideKV makes on every request (storage.FirstGetter:
// the newest version of a key at or below a timestamp is the first key of
// a span) without an iterator, which on the B+-tree would read a window of
// 32 pairs and pin a version for one of them. The B+-tree stops at the
// first visible entry; an unordered index keeps the smallest of those it
// visits (one bucket, when the span is inside one group).
func (e *Engine) GetFirst(lower, upper, kdst []byte) ([]byte, []byte, bool, error) {
	if err := storage.CheckIterBounds(lower, upper); err != nil {
		return nil, nil, false, err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, nil, false, storage.ErrClosed
	}
	return first(e.idx, lower, upper, kdst, (*entry).latest)
}

// GetFirst is Engine.GetFirst as of the snapshot.
func (s *snapshot) GetFirst(lower, upper, kdst []byte) ([]byte, []byte, bool, error) {
	if s.closed.Load() {
		return nil, nil, false, storage.ErrClosed
	}
	if err := storage.CheckIterBounds(lower, upper); err != nil {
		return nil, nil, false, err
	}
	s.e.mu.RLock()
	defer s.e.mu.RUnlock()
	return first(s.e.idx, lower, upper, kdst, func(en *entry) ([]byte, bool) { return en.at(s.seq) })
}

// first finds the smallest key of [lower, upper) that read sees, returning
// it appended to kdst and a copy of its value.
func first(idx index, lower, upper, kdst []byte, read func(*entry) ([]byte, bool)) ([]byte, []byte, bool, error) {
	var best *entry
	var val []byte
	idx.scan(lower, upper, func(en *entry) bool {
		v, ok := read(en)
		if !ok {
			return true
		}
		if best == nil || bytes.Compare(en.key, best.key) < 0 {
			best, val = en, v
		}
		return !idx.ordered()
	})
	if best == nil {
		return nil, nil, false, nil
	}
	return append(kdst, best.key...), bytes.Clone(val), true, nil
}
