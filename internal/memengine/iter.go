package memengine

import (
	"bytes"
	"slices"
	"sync/atomic"

	"github.com/tidekv/tidekv/internal/storage"
)

// iterWindow is how many pairs a B+-tree iterator reads per visit to the
// leaves; one at a time would cost a descent per Next.
const iterWindow = 32

// pair is one key and the value an iterator sees; both belong to the engine
// and are never mutated.
type pair struct{ key, value []byte }

// iter reads [lower, upper) as of seq. Over the B+-tree it sweeps the leaves
// a window at a time, re-descending from the last key it returned (so
// writers may split and merge leaves in between) and pinning seq so the
// versions it reads stay. An unordered index has no cheaper way to a span
// than reading all of it, so the iterator does that once, when it opens,
// and sorts it: what it then costs is memory for the span's pairs, not a
// pin.
//
// Key and Value are copied into buffers the iterator reuses at every
// positioning call, so a caller keeping a slice past the next call sees it
// change, as with Pebble.
type iter struct {
	e            *Engine
	seq          uint64
	lower, upper []byte // nil upper: unbounded
	// window holds consecutive pairs of the span visible at seq, in
	// ascending order: all of them, or (sweeping) up to iterWindow.
	window []pair
	pos    int
	valid  bool
	// sweeping: the index is the B+-tree, read a window at a time.
	sweeping bool
	// more: the last window stopped because it was full, so the span may
	// go on past it.
	more           bool
	keyBuf, valBuf []byte
	closed         bool
}

// newIterLocked opens an iterator at seq; the caller holds mu and, for an
// unordered index, calls sortWindow after releasing it.
func (e *Engine) newIterLocked(seq uint64, lower, upper []byte) *iter {
	// bytes.Clone keeps nil nil, and a nil upper means unbounded.
	it := &iter{e: e, seq: seq, lower: bytes.Clone(lower), upper: bytes.Clone(upper)}
	if e.idx.ordered() {
		it.sweeping = true
		e.pinLocked(seq)
	} else {
		e.idx.scan(lower, upper, func(en *entry) bool {
			if v, ok := en.at(seq); ok {
				it.window = append(it.window, pair{en.key, v})
			}
			return true
		})
	}
	e.openIters.Add(1)
	return it
}

// sortWindow orders what an unordered index yielded, outside the lock:
// the pairs are immutable, so writers need not wait for the sort.
func (it *iter) sortWindow() {
	if !it.sweeping {
		slices.SortFunc(it.window, func(a, b pair) int { return bytes.Compare(a.key, b.key) })
	}
}

// fill reads the next window of a sweep: up to iterWindow visible pairs at
// or after from (strictly after unless inclusive), and positions on the
// first.
func (it *iter) fill(from []byte, inclusive bool) bool {
	clear(it.window)
	it.window, it.pos, it.more = it.window[:0], 0, false
	it.e.mu.RLock()
	it.e.idx.scan(from, it.upper, func(en *entry) bool {
		if !inclusive && bytes.Equal(en.key, from) {
			return true
		}
		v, ok := en.at(it.seq)
		if !ok {
			return true
		}
		if len(it.window) == iterWindow {
			it.more = true
			return false
		}
		it.window = append(it.window, pair{en.key, v})
		return true
	})
	it.e.mu.RUnlock()
	it.valid = len(it.window) > 0
	return it.valid
}

func (it *iter) First() bool {
	if it.closed {
		return false
	}
	if it.sweeping {
		return it.fill(it.lower, true)
	}
	it.pos = 0
	it.valid = len(it.window) > 0
	return it.valid
}

func (it *iter) SeekGE(key []byte) bool {
	if it.closed {
		return false
	}
	// Like Pebble: below lower seeks to lower; at or above upper is empty.
	if bytes.Compare(key, it.lower) < 0 {
		key = it.lower
	}
	if it.sweeping {
		return it.fill(key, true)
	}
	it.pos, _ = slices.BinarySearchFunc(it.window, key, func(p pair, k []byte) int { return bytes.Compare(p.key, k) })
	it.valid = it.pos < len(it.window)
	return it.valid
}

func (it *iter) Next() bool {
	if it.closed || !it.valid {
		return false
	}
	it.pos++
	if it.pos < len(it.window) {
		return true
	}
	if !it.more {
		it.valid = false
		return false
	}
	// Keys are immutable, so the last one can serve as the next pivot even
	// though fill reuses the window.
	return it.fill(it.window[len(it.window)-1].key, false)
}

func (it *iter) Valid() bool { return !it.closed && it.valid }

func (it *iter) Key() []byte {
	if !it.Valid() {
		return nil
	}
	it.keyBuf = append(it.keyBuf[:0], it.window[it.pos].key...)
	return it.keyBuf
}

func (it *iter) Value() []byte {
	if !it.Valid() {
		return nil
	}
	it.valBuf = append(it.valBuf[:0], it.window[it.pos].value...)
	return it.valBuf
}

func (it *iter) Close() error {
	if it.closed {
		return nil
	}
	it.closed, it.valid, it.window = true, false, nil
	if it.sweeping {
		it.e.unpin(it.seq)
	}
	it.e.openIters.Add(-1)
	return nil
}

// snapshot reads the engine as of seq, which it pins until closed.
type snapshot struct {
	e      *Engine
	seq    uint64
	closed atomic.Bool
}

func (s *snapshot) Get(key []byte) ([]byte, bool, error) {
	if s.closed.Load() {
		return nil, false, storage.ErrClosed
	}
	s.e.mu.RLock()
	defer s.e.mu.RUnlock()
	return get(s.e.idx, key, func(en *entry) ([]byte, bool) { return en.at(s.seq) })
}

func (s *snapshot) NewIter(lower, upper []byte) (storage.Iterator, error) {
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	if err := storage.CheckIterBounds(lower, upper); err != nil {
		return nil, err
	}
	s.e.mu.RLock()
	it := s.e.newIterLocked(s.seq, lower, upper)
	s.e.mu.RUnlock()
	it.sortWindow()
	return it, nil
}

func (s *snapshot) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.e.unpin(s.seq)
		s.e.openSnaps.Add(-1)
	}
	return nil
}
