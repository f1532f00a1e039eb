package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
)

// memItem is one key/value pair. Both slices are owned by the engine and
// never mutated after insertion, which is what lets cloned trees (snapshots,
// iterators) share them.
type memItem struct {
	key, value []byte
}

func memLess(a, b memItem) bool { return bytes.Compare(a.key, b.key) < 0 }

// size is what the pair counts for in ApproximateSize.
func (it memItem) size() int { return len(it.key) + len(it.value) }

type memTree = btree.BTreeG[memItem]

// memDegree is the B-tree fan-out; any small value works, 32 keeps trees
// shallow without making the copy-on-write node copies large.
const memDegree = 32

// MemEngine is the in-memory twin of the Pebble engine, for tests. It keeps
// a copy-on-write B-tree: snapshots and iterators take an O(1) clone, so they
// are isolated from later writes exactly as Pebble's are.
//
// Beyond Engine it offers test hooks: SetCommitError and SetIngestError inject
// failures, CrashClone simulates a crash that loses unsynced writes.
type MemEngine struct {
	mu   sync.RWMutex
	tree *memTree
	// durable is the state as of the last sync point (synced commit, Sync,
	// IngestSST): what would survive a crash, since a synced WAL write also
	// makes every earlier write durable.
	durable *memTree
	// unsynced holds the batches committed without sync since the last sync
	// point, in order, for CrashCloneKeeping.
	unsynced [][]memOp
	// size tallies tree's bytes for ApproximateSize.
	size      *SizeTally
	closed    bool
	commitErr error
	ingestErr error

	// Open iterators and snapshots, so Close can report leaks like Pebble.
	openIters atomic.Int64
	openSnaps atomic.Int64
}

var _ Engine = (*MemEngine)(nil)

// NewMem returns an empty in-memory engine.
func NewMem() *MemEngine { return memEngineOf(btree.NewG(memDegree, memLess)) }

// memEngineOf returns an engine holding t, tallying its keys.
func memEngineOf(t *memTree) *MemEngine {
	e := &MemEngine{tree: t, durable: t.Clone(), size: NewSizeTally()}
	t.Ascend(func(it memItem) bool {
		e.size.Change(it.key, 0, it.size())
		return true
	})
	return e
}

// SetCommitError makes every subsequent Batch.Commit fail with err, applying
// nothing, until called again with nil. Lets callers test write-error paths.
func (e *MemEngine) SetCommitError(err error) {
	e.mu.Lock()
	e.commitErr = err
	e.mu.Unlock()
}

// SetIngestError makes every subsequent IngestSST fail with err, until called
// again with nil. It fails at the worst point Pebble can: after the span was
// durably cleared and before the file's keys appear, so callers can test that
// they recover from a half-applied snapshot.
func (e *MemEngine) SetIngestError(err error) {
	e.mu.Lock()
	e.ingestErr = err
	e.mu.Unlock()
}

// CrashClone returns a new, independent engine holding only what was durable
// at the last sync point, as if the process had crashed and restarted now.
// Unsynced commits are all lost: the adversarial but legal outcome (Pebble
// may or may not have persisted them).
func (e *MemEngine) CrashClone() *MemEngine { return e.CrashCloneKeeping(0) }

// CrashCloneKeeping is CrashClone, except that the first n batches committed
// without sync since the last sync point survive too: a write-ahead log may
// reach the disk in part before any fsync, always as a prefix.
func (e *MemEngine) CrashCloneKeeping(n int) *MemEngine {
	e.mu.Lock()
	t, kept := e.durable.Clone(), e.unsynced[:min(n, len(e.unsynced))]
	e.mu.Unlock()
	// Tallying every key of the clone is the engine's only walk over all
	// of them; it reads the clone, not the engine, so it takes no lock.
	c := memEngineOf(t)
	for _, ops := range kept {
		c.applyOpsLocked(ops)
	}
	c.markDurableLocked()
	return c
}

// UnsyncedBatches counts the batches committed without sync since the last
// sync point.
func (e *MemEngine) UnsyncedBatches() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.unsynced)
}

// markDurableLocked records the current state as the crash-survivable one.
func (e *MemEngine) markDurableLocked() {
	e.durable = e.tree.Clone()
	e.unsynced = nil
}

// clone takes a point-in-time view for a snapshot or iterator. Clone
// mutates the source tree's copy-on-write bookkeeping, hence the write lock.
func (e *MemEngine) clone() (*memTree, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	return e.tree.Clone(), nil
}

func (e *MemEngine) Get(key []byte) ([]byte, bool, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, false, ErrClosed
	}
	return memGet(e.tree, key)
}

func memGet(t *memTree, key []byte) ([]byte, bool, error) {
	it, ok := t.Get(memItem{key: key})
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(it.value), true, nil
}

func (e *MemEngine) NewIter(lower, upper []byte) (Iterator, error) {
	if err := CheckIterBounds(lower, upper); err != nil {
		return nil, err
	}
	t, err := e.clone()
	if err != nil {
		return nil, err
	}
	return newMemIter(e, t, lower, upper), nil
}

func (e *MemEngine) NewBatch() Batch {
	// Like the Pebble engine: a batch from a closed engine is born closed.
	return &memBatch{e: e, closed: e.isClosed()}
}

func (e *MemEngine) NewSnapshot() Snapshot {
	t, err := e.clone()
	if err != nil {
		return closedSnapshot{}
	}
	e.openSnaps.Add(1)
	return &memSnapshot{e: e, tree: t}
}

func (e *MemEngine) WriteSST(r Reader, lower, upper []byte, path string) (SSTStats, error) {
	if e.isClosed() {
		return SSTStats{}, ErrClosed
	}
	return WriteMemSST(r, lower, upper, path)
}

func (e *MemEngine) IngestSST(path string, lower, upper []byte) error {
	if e.isClosed() {
		return ErrClosed
	}
	items, err := ReadMemSST(path, lower, upper)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	// The empty key is never stored, so clearing from lower (even "")
	// clears the same keys as from CheckDeleteSpan's normalised start.
	e.deleteRangeLocked(lower, upper)
	if e.ingestErr != nil {
		e.markDurableLocked()
		return e.ingestErr
	}
	for _, it := range items {
		e.setLocked(memItem{key: it.Key, value: it.Value})
	}
	e.markDurableLocked()
	// Pebble consumes the file on success; do the same so tests cannot come
	// to depend on it surviving.
	_ = os.Remove(path)
	return nil
}

// ApproximateSize is the sum of key and value lengths in the span: exact
// for the whole engine and for spans of at most SizeWalkKeys keys, and
// estimated from a sample of the keys for larger ones (SizeTally.Size), so
// that it never reads every key.
func (e *MemEngine) ApproximateSize(lower, upper []byte) (uint64, error) {
	if err := CheckIterBounds(lower, upper); err != nil {
		return 0, err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return 0, ErrClosed
	}
	return e.size.Size(lower, upper, func(fn func(int) bool) {
		e.tree.AscendGreaterOrEqual(memItem{key: lower}, func(it memItem) bool {
			return (upper == nil || bytes.Compare(it.key, upper) < 0) && fn(it.size())
		})
	}), nil
}

func (e *MemEngine) Sync() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.markDurableLocked()
	return nil
}

func (e *MemEngine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.closed = true
	var errs []error
	if n := e.openIters.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("storage: leaked iterators: %d open", n))
	}
	if n := e.openSnaps.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("storage: leaked snapshots: %d open", n))
	}
	return errors.Join(errs...)
}

func (e *MemEngine) isClosed() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.closed
}

func (e *MemEngine) setLocked(it memItem) {
	before := 0
	if old, ok := e.tree.ReplaceOrInsert(it); ok {
		before = old.size()
	}
	e.size.Change(it.key, before, it.size())
}

func (e *MemEngine) deleteLocked(key []byte) {
	if old, ok := e.tree.Delete(memItem{key: key}); ok {
		e.size.Change(old.key, old.size(), 0)
	}
}

// deleteRangeLocked removes [start, end).
func (e *MemEngine) deleteRangeLocked(start, end []byte) {
	var doomed []memItem
	e.tree.AscendRange(memItem{key: start}, memItem{key: end}, func(it memItem) bool {
		doomed = append(doomed, it)
		return true
	})
	for _, it := range doomed {
		e.deleteLocked(it.key)
	}
}

// memOp is one buffered batch operation.
type memOp struct {
	kind       memOpKind
	key, value []byte // for DeleteRange: start, end
}

type memOpKind uint8

const (
	memSet memOpKind = iota
	memDelete
	memDeleteRange
)

type memBatch struct {
	e         *MemEngine
	ops       []memOp
	committed bool
	closed    bool
}

func (b *memBatch) writable() error {
	switch {
	case b.closed:
		return ErrClosed
	case b.committed:
		return ErrBatchCommitted
	}
	return nil
}

func (b *memBatch) Set(key, value []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	// Copy both, as Pebble does, so the caller may reuse its buffers. The
	// value copy is non-nil even when empty, so Get reports it as found.
	b.ops = append(b.ops, memOp{kind: memSet, key: bytes.Clone(key), value: append([]byte{}, value...)})
	return nil
}

func (b *memBatch) Delete(key []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	b.ops = append(b.ops, memOp{kind: memDelete, key: bytes.Clone(key)})
	return nil
}

func (b *memBatch) DeleteRange(start, end []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	start, empty, err := CheckDeleteSpan(start, end)
	if err != nil || empty {
		return err // empty spans are dropped, as in the Pebble engine
	}
	b.ops = append(b.ops, memOp{kind: memDeleteRange, key: bytes.Clone(start), value: bytes.Clone(end)})
	return nil
}

func (b *memBatch) Commit(sync bool) error {
	if err := b.writable(); err != nil {
		return err
	}
	e := b.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	b.committed = true
	if e.commitErr != nil {
		return e.commitErr
	}
	if len(b.ops) == 0 {
		// Pebble returns early for an empty batch, without a WAL write, so
		// an empty synced commit is not a sync point there either.
		return nil
	}
	// Holding the write lock for the whole batch is what makes it atomic to
	// readers.
	e.applyOpsLocked(b.ops)
	if sync {
		e.markDurableLocked()
	} else {
		e.unsynced = append(e.unsynced, b.ops)
	}
	return nil
}

func (e *MemEngine) applyOpsLocked(ops []memOp) {
	for _, op := range ops {
		switch op.kind {
		case memSet:
			e.setLocked(memItem{key: op.key, value: op.value})
		case memDelete:
			e.deleteLocked(op.key)
		case memDeleteRange:
			e.deleteRangeLocked(op.key, op.value)
		}
	}
}

func (b *memBatch) Empty() bool { return len(b.ops) == 0 }
func (b *memBatch) Count() int  { return len(b.ops) }

func (b *memBatch) Close() error {
	b.closed = true
	b.ops = nil
	return nil
}

type memSnapshot struct {
	e      *MemEngine
	tree   *memTree // private clone: never written, so reads need no lock
	closed atomic.Bool
}

func (s *memSnapshot) Get(key []byte) ([]byte, bool, error) {
	if s.closed.Load() {
		return nil, false, ErrClosed
	}
	return memGet(s.tree, key)
}

func (s *memSnapshot) NewIter(lower, upper []byte) (Iterator, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := CheckIterBounds(lower, upper); err != nil {
		return nil, err
	}
	// The snapshot's tree is immutable, so iterators can share it.
	return newMemIter(s.e, s.tree, lower, upper), nil
}

func (s *memSnapshot) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.e.openSnaps.Add(-1)
	}
	return nil
}

// memIterBatch is how many items an iterator fetches per tree descent;
// stepping one item at a time would cost a full O(log n) descent per Next.
const memIterBatch = 32

// memIter iterates an immutable tree. Key and Value are copied into buffers
// the iterator reuses on every positioning call, so a caller that keeps a
// slice past the next call sees it change, just as with Pebble, instead of
// the bug going unnoticed until production.
type memIter struct {
	e            *MemEngine
	tree         *memTree
	lower, upper []byte // nil = unbounded
	buf          []memItem
	pos          int
	valid        bool
	keyBuf       []byte
	valBuf       []byte
	closed       bool
}

func newMemIter(e *MemEngine, t *memTree, lower, upper []byte) *memIter {
	e.openIters.Add(1)
	it := &memIter{e: e, tree: t, buf: make([]memItem, 0, memIterBatch)}
	it.lower, it.upper = copyBounds(lower, upper)
	return it
}

// fill loads up to memIterBatch items at or after from (strictly after if
// !inclusive) and below the upper bound, and positions on the first.
func (it *memIter) fill(from []byte, inclusive bool) bool {
	it.buf = it.buf[:0]
	it.pos = 0
	it.tree.AscendGreaterOrEqual(memItem{key: from}, func(item memItem) bool {
		if !inclusive && bytes.Equal(item.key, from) {
			return true
		}
		if it.upper != nil && bytes.Compare(item.key, it.upper) >= 0 {
			return false
		}
		it.buf = append(it.buf, item)
		return len(it.buf) < memIterBatch
	})
	it.valid = len(it.buf) > 0
	return it.valid
}

func (it *memIter) First() bool {
	if it.closed {
		return false
	}
	return it.fill(it.lower, true)
}

func (it *memIter) SeekGE(key []byte) bool {
	if it.closed {
		return false
	}
	// Clamp like Pebble: below lower seeks to lower; at/above upper is empty
	// (fill stops at upper).
	if it.lower != nil && bytes.Compare(key, it.lower) < 0 {
		key = it.lower
	}
	return it.fill(key, true)
}

func (it *memIter) Next() bool {
	if it.closed || !it.valid {
		return false
	}
	it.pos++
	if it.pos < len(it.buf) {
		return true
	}
	if len(it.buf) < memIterBatch {
		// The last fill already hit the end or the upper bound.
		it.valid = false
		return false
	}
	// Items are immutable, so the last key can serve as the next pivot even
	// though fill reuses buf.
	return it.fill(it.buf[len(it.buf)-1].key, false)
}

func (it *memIter) Valid() bool { return !it.closed && it.valid }

func (it *memIter) Key() []byte {
	if !it.Valid() {
		return nil
	}
	it.keyBuf = append(it.keyBuf[:0], it.buf[it.pos].key...)
	return it.keyBuf
}

func (it *memIter) Value() []byte {
	if !it.Valid() {
		return nil
	}
	it.valBuf = append(it.valBuf[:0], it.buf[it.pos].value...)
	return it.valBuf
}

func (it *memIter) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	it.valid = false
	it.buf = nil
	it.e.openIters.Add(-1)
	return nil
}
