package storage

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

type pebbleSnapshot struct {
	snap   *pebble.Snapshot
	closed atomic.Bool
	// first is the iterator the snapshot's point reads (GetFirst) share,
	// moved from key to key by SetBounds. A snapshot serves one request's
	// keys (a BatchGet's: a Redis hash's marker and fields, which lie side
	// by side), and a fresh iterator per key opened every level's file and
	// read its index blocks again: half of an HMGET's server CPU
	// (docs/benchmarks/cost.md, issue 33's Redis targets). Pebble's
	// iterator is not safe for concurrent use, so firstMu guards it, and a
	// read that finds it busy opens an iterator of its own. Close closes it.
	firstMu sync.Mutex
	first   *pebble.Iterator
}

func (s *pebbleSnapshot) Get(key []byte) ([]byte, bool, error) {
	if s.closed.Load() {
		return nil, false, ErrClosed
	}
	if len(key) == 0 {
		return nil, false, nil
	}
	return finishGet(s.snap.Get(key))
}

func (s *pebbleSnapshot) NewIter(lower, upper []byte) (Iterator, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	return newPebbleIter(s.snap, lower, upper)
}

func (s *pebbleSnapshot) GetFirst(lower, upper, kdst []byte) ([]byte, []byte, bool, error) {
	if s.closed.Load() {
		return kdst, nil, false, ErrClosed
	}
	opts, ok, err := firstOptions(lower, upper)
	if !ok {
		return kdst, nil, false, err
	}
	if !s.firstMu.TryLock() {
		it, err := s.snap.NewIter(&opts)
		return readFirst(it, err, kdst)
	}
	defer s.firstMu.Unlock()
	if s.closed.Load() { // Close came between the check above and the lock
		return kdst, nil, false, ErrClosed
	}
	if s.first == nil {
		if s.first, err = s.snap.NewIter(&opts); err != nil {
			s.first = nil
			return kdst, nil, false, err
		}
	} else {
		s.first.SetBounds(opts.LowerBound, opts.UpperBound)
	}
	key, value, found, err := firstOf(s.first, kdst)
	if err != nil {
		// An iterator's error stays with it: the next read opens another.
		err = errors.Join(err, s.first.Close())
		s.first = nil
	}
	return key, value, found, err
}

func (s *pebbleSnapshot) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.firstMu.Lock()
	var err error
	if s.first != nil {
		err, s.first = s.first.Close(), nil
	}
	s.firstMu.Unlock()
	return errors.Join(err, s.snap.Close())
}

// pebbleIter adapts *pebble.Iterator. Its IterOptions live inside the struct
// so wrapper and options cost one allocation.
type pebbleIter struct {
	it     *pebble.Iterator
	opts   pebble.IterOptions
	err    error // from ValueAndErr; Pebble also keeps it, we report it on Close
	closed bool
	// empty marks a span with lower >= upper. Pebble treats a non-nil empty
	// UpperBound as no bound at all, so such spans never reach its
	// positioning calls. The pebble.Iterator is still opened so leak
	// reporting on Close matches the mem engine.
	empty bool
}

func newPebbleIter(r interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}, lower, upper []byte) (Iterator, error) {
	if err := CheckIterBounds(lower, upper); err != nil {
		return nil, err
	}
	p := &pebbleIter{empty: upper != nil && bytes.Compare(lower, upper) >= 0}
	if len(lower) == 0 {
		// Same meaning, and a non-nil empty lower bound trips an
		// index-out-of-range in Pebble's race/invariants builds
		// (testingDisableSeekOpt reads key[0]), i.e. under go test -race.
		lower = nil
	}
	p.opts.LowerBound, p.opts.UpperBound = copyBounds(lower, upper)
	it, err := r.NewIter(&p.opts)
	if err != nil {
		return nil, err
	}
	p.it = it
	return p, nil
}

// firstOptions returns the iterator options of GetFirst's span, and false
// when there is nothing to read (an empty span, or err). The iterator is
// closed before GetFirst returns, so the bounds need no copy.
func firstOptions(lower, upper []byte) (pebble.IterOptions, bool, error) {
	if err := CheckIterBounds(lower, upper); err != nil {
		return pebble.IterOptions{}, false, err
	}
	if upper != nil && bytes.Compare(lower, upper) >= 0 {
		return pebble.IterOptions{}, false, nil // Pebble reads an empty upper bound as none
	}
	if len(lower) == 0 {
		lower = nil // as in newPebbleIter
	}
	return pebble.IterOptions{LowerBound: lower, UpperBound: upper}, true, nil
}

// readFirst returns GetFirst's answer from a fresh iterator and closes it.
// The iterator comes from Pebble's pool: the value's copy is the only
// allocation.
func readFirst(it *pebble.Iterator, err error, kdst []byte) (key, value []byte, found bool, _ error) {
	if err != nil {
		return kdst, nil, false, err
	}
	key, value, found, err = firstOf(it, kdst)
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return kdst, nil, false, err
	}
	return key, value, found, nil
}

// firstOf is GetFirst's answer from it, positioned anew within its bounds:
// the first key appended to kdst and a copy of its value.
func firstOf(it *pebble.Iterator, kdst []byte) (key, value []byte, found bool, err error) {
	if !it.First() {
		return kdst, nil, false, it.Error()
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return kdst, nil, false, err
	}
	return append(kdst, it.Key()...), append(make([]byte, 0, len(v)), v...), true, nil
}

func (p *pebbleIter) First() bool {
	if p.closed || p.empty {
		return false
	}
	return p.it.First()
}

func (p *pebbleIter) SeekGE(key []byte) bool {
	if p.closed || p.empty {
		return false
	}
	if len(key) == 0 {
		// The smallest key: same as First, and avoids handing Pebble a
		// non-nil empty key (see newPebbleIter).
		return p.it.First()
	}
	// Pebble clamps key to the bounds itself.
	return p.it.SeekGE(key)
}

func (p *pebbleIter) Next() bool {
	// Pebble's Next on an unpositioned iterator is not well-defined; pin it
	// to "false" so both engines agree.
	if p.closed || !p.it.Valid() {
		return false
	}
	return p.it.Next()
}

func (p *pebbleIter) Valid() bool { return !p.closed && p.it.Valid() }

func (p *pebbleIter) Key() []byte {
	if !p.Valid() {
		return nil
	}
	return p.it.Key()
}

func (p *pebbleIter) Value() []byte {
	if !p.Valid() {
		return nil
	}
	// Value() would swallow the error; ValueAndErr also invalidates the
	// iterator on failure.
	v, err := p.it.ValueAndErr()
	if err != nil {
		p.err = err
		return nil
	}
	return v
}

func (p *pebbleIter) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	// Pebble's Close returns the iterator's error, which includes any
	// ValueAndErr failure; p.err is the fallback.
	if err := p.it.Close(); err != nil {
		return err
	}
	return p.err
}
