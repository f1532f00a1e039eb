package routed

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tidekv/tidekv/internal/storage"
)

// Engine routes each key to the engine owning it. Safe for concurrent use.
type Engine struct {
	base storage.Engine
	// routable is where parts may be added; a write elsewhere goes to the
	// base at once, and a batch records (to route at commit) only from its
	// first write inside.
	routable []Span
	// routeMu guards tbl. Reads and commits hold it shared while they
	// route and open what they read or write, so AddPart (exclusive) moves
	// the base's keys into a new part with no read or commit routed by the
	// old table in flight.
	routeMu sync.RWMutex
	tbl     *table
	// mixMu: a commit touching several engines holds it shared, and a
	// snapshot or iterator across engines is taken holding it exclusive,
	// so no reader sees such a batch in one engine and not another.
	// Commits to one engine do not take it: each engine orders its own.
	mixMu  sync.RWMutex
	closed atomic.Bool
}

var (
	_ storage.Engine      = (*Engine)(nil)
	_ storage.FirstGetter = (*Engine)(nil)
	_ storage.Volatile    = (*Engine)(nil)
)

// New routes every key to base until parts are added, which they may be
// inside routable only.
func New(base storage.Engine, routable ...Span) *Engine {
	return &Engine{base: base, routable: routable, tbl: &table{}}
}

// spanMayRoute reports whether [lower, upper) (nil upper: unbounded)
// touches a routable span. What does not is the base's for good, and is
// read and written there with no look-up.
func (e *Engine) spanMayRoute(lower, upper []byte) bool {
	for _, r := range e.routable {
		if bytes.Compare(lower, r.Hi) < 0 && (upper == nil || bytes.Compare(r.Lo, upper) < 0) {
			return true
		}
	}
	return false
}

// keyMayRoute is spanMayRoute for one key.
func (e *Engine) keyMayRoute(key []byte) bool {
	for _, r := range e.routable {
		if bytes.Compare(r.Lo, key) <= 0 && bytes.Compare(key, r.Hi) < 0 {
			return true
		}
	}
	return false
}

// inRoutable reports whether s lies inside one routable span.
func (e *Engine) inRoutable(s Span) bool {
	for _, r := range e.routable {
		if bytes.Compare(r.Lo, s.Lo) <= 0 && bytes.Compare(s.Hi, r.Hi) <= 0 {
			return true
		}
	}
	return false
}

// AddPart routes spans to eng from now on, with what base holds in them
// moved over (keys written before the route existed).
func (e *Engine) AddPart(eng storage.Engine, spans ...Span) error {
	return e.addPart(eng, spans, moveFromBase)
}

// ReopenPart routes spans to eng, an engine that held them before the
// process restarted and lost them: what base holds in them is a leftover
// no reader saw (of an AddPart the process stopped in), and is cleared.
func (e *Engine) ReopenPart(eng storage.Engine, spans ...Span) error {
	return e.addPart(eng, spans, clearBase)
}

func (e *Engine) addPart(eng storage.Engine, spans []Span, fill func(base, eng storage.Engine, s Span) error) error {
	if e.closed.Load() {
		return storage.ErrClosed
	}
	for _, s := range spans {
		if !e.inRoutable(s) {
			return fmt.Errorf("routed: span [%q, %q) lies outside the routable spans", s.Lo, s.Hi)
		}
	}
	e.routeMu.Lock()
	defer e.routeMu.Unlock()
	t, err := e.tbl.with(eng, spans)
	if err != nil {
		return err
	}
	for _, s := range spans {
		if err := fill(e.base, eng, s); err != nil {
			return err
		}
	}
	e.tbl = t
	return nil
}

func moveFromBase(base, eng storage.Engine, s Span) error {
	b := eng.NewBatch()
	defer b.Close()
	it, err := base.NewIter(s.Lo, s.Hi)
	if err != nil {
		return err
	}
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		err = b.Set(it.Key(), it.Value())
	}
	if err = errors.Join(err, it.Close()); err != nil {
		return err
	}
	if err := b.Commit(false); err != nil {
		return err
	}
	return clearBase(base, eng, s)
}

func clearBase(base, _ storage.Engine, s Span) error {
	b := base.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(s.Lo, s.Hi); err != nil {
		return err
	}
	return b.Commit(true)
}

// Volatile reports whether [lower, upper) touches a part: every part is
// an engine whose contents a restart loses.
func (e *Engine) Volatile(lower, upper []byte) bool {
	e.routeMu.RLock()
	defer e.routeMu.RUnlock()
	for _, p := range e.tbl.pieces(lower, upper) {
		if p.eng != baseIdx {
			return true
		}
	}
	return false
}

// engine is engine i of t (baseIdx: the base).
func (e *Engine) engine(t *table, i int) storage.Engine {
	if i == baseIdx {
		return e.base
	}
	return t.engs[i]
}

func (e *Engine) Get(key []byte) ([]byte, bool, error) {
	if !e.keyMayRoute(key) {
		return e.base.Get(key)
	}
	e.routeMu.RLock()
	defer e.routeMu.RUnlock()
	return e.engine(e.tbl, e.tbl.engineOf(key)).Get(key)
}

func (e *Engine) NewIter(lower, upper []byte) (storage.Iterator, error) {
	if !e.spanMayRoute(lower, upper) {
		return e.base.NewIter(lower, upper)
	}
	e.routeMu.RLock()
	defer e.routeMu.RUnlock()
	t := e.tbl
	return newIter(t.pieces(lower, upper), func(i int) storage.Reader { return e.engine(t, i) }, &e.mixMu)
}

func (e *Engine) GetFirst(lower, upper, kdst []byte) ([]byte, []byte, bool, error) {
	if fg, ok := e.base.(storage.FirstGetter); ok && !e.spanMayRoute(lower, upper) {
		return fg.GetFirst(lower, upper, kdst)
	}
	e.routeMu.RLock()
	defer e.routeMu.RUnlock()
	t := e.tbl
	return getFirst(t.pieces(lower, upper), func(i int) storage.Reader { return e.engine(t, i) }, &e.mixMu, kdst)
}

func (e *Engine) NewBatch() storage.Batch { return &batch{e: e} }

// NewSnapshot snapshots every engine at one point between commits.
func (e *Engine) NewSnapshot() storage.Snapshot {
	e.routeMu.RLock()
	defer e.routeMu.RUnlock()
	t := e.tbl
	if len(t.engs) == 0 {
		return e.base.NewSnapshot()
	}
	e.mixMu.Lock()
	defer e.mixMu.Unlock()
	s := &snapshot{t: t, base: e.base.NewSnapshot(), parts: make([]storage.Snapshot, len(t.engs))}
	for i, eng := range t.engs {
		s.parts[i] = eng.NewSnapshot()
	}
	return s
}

func (e *Engine) ApproximateSize(lower, upper []byte) (uint64, error) {
	if err := storage.CheckIterBounds(lower, upper); err != nil {
		return 0, err
	}
	e.routeMu.RLock()
	defer e.routeMu.RUnlock()
	t := e.tbl
	var sum uint64
	for _, p := range t.pieces(lower, upper) {
		n, err := e.engine(t, p.eng).ApproximateSize(p.lo, p.hi)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

func (e *Engine) Sync() error {
	return e.eachEngine(storage.Engine.Sync)
}

// Close closes every engine; the first Close reports their leaks.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return storage.ErrClosed
	}
	return e.eachEngine(storage.Engine.Close)
}

// eachEngine calls f on every routed engine, then on the base, and joins
// their errors.
func (e *Engine) eachEngine(f func(storage.Engine) error) error {
	e.routeMu.RLock()
	t := e.tbl
	e.routeMu.RUnlock()
	var errs []error
	for _, eng := range t.engs {
		errs = append(errs, f(eng))
	}
	return errors.Join(append(errs, f(e.base))...)
}

// snapshot is one snapshot of each engine, taken together.
type snapshot struct {
	t     *table
	base  storage.Snapshot
	parts []storage.Snapshot
}

func (s *snapshot) reader(i int) storage.Reader {
	if i == baseIdx {
		return s.base
	}
	return s.parts[i]
}

func (s *snapshot) Get(key []byte) ([]byte, bool, error) {
	return s.reader(s.t.engineOf(key)).Get(key)
}

func (s *snapshot) NewIter(lower, upper []byte) (storage.Iterator, error) {
	return newIter(s.t.pieces(lower, upper), s.reader, nil)
}

func (s *snapshot) GetFirst(lower, upper, kdst []byte) ([]byte, []byte, bool, error) {
	return getFirst(s.t.pieces(lower, upper), s.reader, nil, kdst)
}

func (s *snapshot) Close() error {
	errs := []error{s.base.Close()}
	for _, p := range s.parts {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
