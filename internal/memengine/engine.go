package memengine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tidekv/tidekv/internal/storage"
)

// Engine is a storage.Engine that keeps everything in memory, in the index
// its Config names. Writers (batch commits, ingestion) hold the write lock
// for the whole batch, which is what makes a batch atomic to readers;
// readers share the read lock.
//
// Nothing is ever durable: Sync and synced commits succeed without doing
// anything, and a crash or restart loses every key. That is a cache's
// contract; the data is refilled from its origin.
type Engine struct {
	mu     sync.RWMutex
	idx    index
	seq    uint64 // the last committed batch's sequence number
	closed bool
	// size tallies the latest values' bytes for ApproximateSize.
	size *storage.SizeTally
	// garbage lists the entries holding versions (or deletions) that only
	// readers open at the time could see; collectLocked drops those once
	// the readers have gone.
	garbage []*entry
	// collectedAt is the count of unpins when garbage was last collected
	// (only a reader going lets anything go), and batchesSince the batches
	// committed since.
	collectedAt  uint64
	batchesSince int

	// pins counts the open snapshots and B+-tree iterators reading at each
	// sequence number, so a write keeps the versions they still see.
	pinMu  sync.Mutex
	pins   map[uint64]int
	unpins uint64

	// Open iterators and snapshots, so Close can report leaks like Pebble.
	openIters atomic.Int64
	openSnaps atomic.Int64
}

var _ storage.Engine = (*Engine)(nil)

// New returns an empty engine, or Validate's error for a bad config.
func New(c Config) (*Engine, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Engine{idx: newIndex(c), pins: map[uint64]int{}, size: storage.NewSizeTally()}, nil
}

// pinLocked registers a reader at seq. The caller holds mu (either way),
// so no batch commits between its reading seq and the pin taking hold.
func (e *Engine) pinLocked(seq uint64) {
	e.pinMu.Lock()
	e.pins[seq]++
	e.pinMu.Unlock()
}

func (e *Engine) unpin(seq uint64) {
	e.pinMu.Lock()
	if e.pins[seq]--; e.pins[seq] == 0 {
		delete(e.pins, seq)
	}
	e.unpins++
	e.pinMu.Unlock()
}

// readers returns the sequence numbers open readers read at, ascending, and
// the count of unpins so far. Readers are few at a time, so this is cheap.
func (e *Engine) readers() (pins []uint64, unpins uint64) {
	e.pinMu.Lock()
	defer e.pinMu.Unlock()
	if len(e.pins) == 0 {
		return nil, e.unpins // the common case, without an allocation
	}
	pins = make([]uint64, 0, len(e.pins))
	for seq := range e.pins {
		pins = append(pins, seq)
	}
	slices.Sort(pins)
	return pins, e.unpins
}

// beginWriteLocked starts a batch under the write lock: it returns the
// batch's sequence number and the sequence numbers readers hold, first
// collecting what readers closed since the last collection no longer need.
//
// A collection walks the whole garbage list. Once no reader is open it
// empties the list, so its cost is that of the writes that filled it; while
// one stays open (a long snapshot send) and short ones come and go, it runs
// only every len(garbage)/4 batches, so a commit pays for a few entries, not
// for the whole list every time.
func (e *Engine) beginWriteLocked() (seq uint64, pins []uint64) {
	pins, unpins := e.readers()
	e.batchesSince++
	if unpins != e.collectedAt && (len(pins) == 0 || e.batchesSince >= len(e.garbage)/4) {
		e.collectLocked(pins)
		e.collectedAt, e.batchesSince = unpins, 0
	}
	return e.seq + 1, pins
}

func (e *Engine) collectLocked(pins []uint64) {
	kept := e.garbage[:0]
	for _, en := range e.garbage {
		if en.removed {
			continue
		}
		en.prune(pins)
		switch {
		case en.dead():
			e.idx.remove(en)
			en.removed = true
		case en.settled():
			en.queued = false
		default:
			kept = append(kept, en)
		}
	}
	clear(e.garbage[len(kept):])
	e.garbage = kept
}

// track queues en for collection if it holds more than one live version.
func (e *Engine) track(en *entry) {
	if !en.settled() && !en.queued {
		en.queued = true
		e.garbage = append(e.garbage, en)
	}
}

func (e *Engine) setLocked(key, value []byte, seq uint64, pins []uint64) {
	if en := e.idx.get(key); en != nil {
		e.size.Change(en.key, en.size(), len(key)+len(value))
		en.write(version{seq, value}, pins)
		e.track(en)
		return
	}
	e.size.Change(key, 0, len(key)+len(value))
	e.idx.insert(newEntry(key, version{seq, value}))
}

func (e *Engine) deleteLocked(en *entry, seq uint64, pins []uint64) {
	if _, live := en.latest(); !live {
		return // already deleted, kept only for older readers
	}
	e.size.Change(en.key, en.size(), 0)
	en.write(version{seq: seq}, pins)
	if en.dead() {
		e.idx.remove(en)
		en.removed = true
		return
	}
	e.track(en)
}

func (e *Engine) deleteRangeLocked(start, end []byte, seq uint64, pins []uint64) {
	for _, en := range collect(e.idx, start, end) {
		e.deleteLocked(en, seq, pins)
	}
}

// collect returns the entries with keys in [lower, upper), in the index's
// order; gathering them first lets the caller change the index after.
func collect(idx index, lower, upper []byte) []*entry {
	var out []*entry
	idx.scan(lower, upper, func(en *entry) bool {
		out = append(out, en)
		return true
	})
	return out
}

func (e *Engine) Get(key []byte) ([]byte, bool, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, false, storage.ErrClosed
	}
	return get(e.idx, key, (*entry).latest)
}

// get reads key's value as read picks it, returning a copy the caller owns.
func get(idx index, key []byte, read func(*entry) ([]byte, bool)) ([]byte, bool, error) {
	en := idx.get(key)
	if en == nil {
		return nil, false, nil
	}
	v, ok := read(en)
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

func (e *Engine) NewIter(lower, upper []byte) (storage.Iterator, error) {
	if err := storage.CheckIterBounds(lower, upper); err != nil {
		return nil, err
	}
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return nil, storage.ErrClosed
	}
	it := e.newIterLocked(e.seq, lower, upper)
	e.mu.RUnlock()
	it.sortWindow()
	return it, nil
}

func (e *Engine) NewBatch() storage.Batch {
	// Like the other engines: a batch from a closed engine is born closed.
	return &batch{e: e, closed: e.isClosed()}
}

// NewSnapshot costs a pin, not a copy: writes made while it is open keep
// the versions it reads, which go when it closes.
func (e *Engine) NewSnapshot() storage.Snapshot {
	e.mu.RLock()
	defer e.mu.RUnlock()
	s := &snapshot{e: e, seq: e.seq}
	if e.closed {
		s.closed.Store(true) // NewSnapshot has no error return; reads say ErrClosed
		return s
	}
	e.pinLocked(s.seq)
	e.openSnaps.Add(1)
	return s
}

// WriteSST writes in the MemEngine's SST format, which every memory engine
// ingests, so a range moves between them as one file.
func (e *Engine) WriteSST(r storage.Reader, lower, upper []byte, path string) (storage.SSTStats, error) {
	if e.isClosed() {
		return storage.SSTStats{}, storage.ErrClosed
	}
	return storage.WriteMemSST(r, lower, upper, path)
}

// IngestSST replaces [lower, upper) with the file's pairs in one batch, so
// readers see the old span or the new one, never a mix. The file is
// validated in full before anything changes.
func (e *Engine) IngestSST(path string, lower, upper []byte) error {
	if e.isClosed() {
		return storage.ErrClosed
	}
	pairs, err := storage.ReadMemSST(path, lower, upper)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return storage.ErrClosed
	}
	seq, pins := e.beginWriteLocked()
	// The empty key is never stored, so clearing from lower (even "")
	// clears exactly the span.
	e.deleteRangeLocked(lower, upper, seq, pins)
	for _, p := range pairs {
		e.setLocked(p.Key, p.Value, seq, pins)
	}
	e.seq = seq
	// Pebble consumes the file on success; do the same so callers cannot
	// come to depend on it surviving.
	_ = os.Remove(path)
	return nil
}

// ApproximateSize is the sum of the latest key and value lengths in the
// span, without reading every key (storage.SizeTally.Size): exact for the
// whole engine, and for a span of at most storage.SizeWalkKeys keys that
// the index can read alone (any span of the B+-tree, a span inside one
// group of a grouped hashed index); estimated from a sample of the keys
// otherwise, since a hashed index can find a span's keys only by looking
// at all of them.
func (e *Engine) ApproximateSize(lower, upper []byte) (uint64, error) {
	if err := storage.CheckIterBounds(lower, upper); err != nil {
		return 0, err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, storage.ErrClosed
	}
	var walk func(fn func(int) bool)
	if e.idx.bounded(lower, upper) {
		walk = func(fn func(int) bool) {
			e.idx.scan(lower, upper, func(en *entry) bool { return fn(en.size()) })
		}
	}
	return e.size.Size(lower, upper, walk), nil
}

// Sync succeeds without doing anything: a memory engine has nothing to make
// durable, and loses everything at a crash.
func (e *Engine) Sync() error {
	if e.isClosed() {
		return storage.ErrClosed
	}
	return nil
}

func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return storage.ErrClosed
	}
	e.closed = true
	var errs []error
	if n := e.openIters.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("memengine: leaked iterators: %d open", n))
	}
	if n := e.openSnaps.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("memengine: leaked snapshots: %d open", n))
	}
	return errors.Join(errs...)
}

func (e *Engine) isClosed() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.closed
}
