package storage

import (
	"bytes"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

type pebbleSnapshot struct {
	snap   *pebble.Snapshot
	closed atomic.Bool
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
	it, err := s.snap.NewIter(&opts)
	return readFirst(it, err, kdst)
}

func (s *pebbleSnapshot) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return s.snap.Close()
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
	if it.First() {
		var v []byte
		if v, err = it.ValueAndErr(); err == nil {
			key, value, found = append(kdst, it.Key()...), append(make([]byte, 0, len(v)), v...), true
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil || !found {
		return kdst, nil, false, err
	}
	return key, value, true, nil
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
