package storage

import (
	"bytes"
	"errors"
	"fmt"
)

// Reader reads keys. Returned slices from Get are copies the caller may keep.
type Reader interface {
	Get(key []byte) (value []byte, found bool, err error)
	// NewIter iterates over keys in [lower, upper) in ascending order; a nil upper means no bound.
	NewIter(lower, upper []byte) (Iterator, error)
}

// Iterator: Key/Value are valid only until the next positioning call.
//
// Next on an iterator that is not positioned at a valid entry (never
// positioned, or exhausted) returns false. SeekGE clamps a key below the lower
// bound to the lower bound. An error during iteration makes the iterator
// invalid; Close returns it.
type Iterator interface {
	First() bool
	SeekGE(key []byte) bool
	Next() bool
	Valid() bool
	Key() []byte
	Value() []byte
	Close() error
}

// Writer mutates keys. Arguments are copied; callers may reuse them after the
// call returns. Set and Delete reject the empty key with ErrEmptyKey.
type Writer interface {
	Set(key, value []byte) error
	Delete(key []byte) error
	DeleteRange(start, end []byte) error // deletes [start, end)
}

// Batch collects writes applied atomically by Commit. Not safe for concurrent use.
type Batch interface {
	Writer
	// Commit applies the batch atomically; with sync the write is durable (fsync'd WAL) when Commit returns.
	Commit(sync bool) error
	Empty() bool
	Count() int // number of operations
	Close() error
}

// FirstGetter is implemented by readers that can return the first key of a
// span without handing out an Iterator: Pebble's engine and snapshots, where
// the Iterator's wrapper and copied bounds would be a point read's only
// allocations besides its value. internal/mvcc's versioned Get, which
// wants the newest version at or below a timestamp (the first key at or
// after a seek key), uses it when the reader has it and NewIter otherwise.
type FirstGetter interface {
	// GetFirst finds the first key in [lower, upper) (a nil upper: no
	// bound) and returns it appended to kdst, and a copy of its value.
	GetFirst(lower, upper, kdst []byte) (key, value []byte, found bool, err error)
}

// Volatile is implemented by engines that keep some spans in memory only
// (internal/storage/routed): what a node stored in them is gone after it
// restarts, whatever its Raft state says was applied.
type Volatile interface {
	// Volatile reports whether [lower, upper) (nil upper: unbounded)
	// touches such a span.
	Volatile(lower, upper []byte) bool
}

// Snapshot is a consistent, immutable view of the engine at the time it was taken.
type Snapshot interface {
	Reader
	Close() error
}

// SSTStats describes a file written by WriteSST.
type SSTStats struct {
	Keys  int   // number of key/value pairs written
	Bytes int64 // size of the file on disk, in bytes
}

// Engine is safe for concurrent use.
type Engine interface {
	Reader
	NewBatch() Batch
	NewSnapshot() Snapshot
	// WriteSST writes every key of r in [lower, upper) into a new SST file at path (the file
	// is created; an empty span yields a valid empty file). Used to ship a range as one unit.
	WriteSST(r Reader, lower, upper []byte, path string) (SSTStats, error)
	// IngestSST atomically-as-seen-by-readers-after-return replaces everything in [lower, upper)
	// with the SST's contents: clear the span (durably), then ingest the file. The file may be moved/consumed.
	IngestSST(path string, lower, upper []byte) error
	// ApproximateSize estimates the bytes stored in [lower, upper). Nodes
	// call it for every replica every heartbeat, so it must not read every
	// key of the span: Pebble sums the on-disk data overlapping it (not
	// its memtable); the memory engines answer from a SizeTally (exact for
	// the whole engine and for spans of up to SizeWalkKeys keys an index
	// reads alone, sampled otherwise; a span without keys reads 0).
	ApproximateSize(lower, upper []byte) (uint64, error)
	// Sync makes all previously committed writes durable.
	Sync() error
	Close() error
}

var (
	// ErrClosed is returned by operations on a closed engine, snapshot,
	// batch or iterator.
	ErrClosed = errors.New("storage: closed")
	// ErrBatchCommitted is returned by writes to, or a second Commit of, a
	// batch whose Commit was already called (successfully or not). Pebble
	// panics on reuse of a committed batch; an error is friendlier.
	ErrBatchCommitted = errors.New("storage: batch already committed")
	// ErrEmptyKey is returned by Set and Delete of the empty key, which
	// cannot be stored (see CheckKey). Empty bounds are fine.
	ErrEmptyKey = errors.New("storage: empty key")
	// ErrInvalidSpan is returned for malformed key spans (lower > upper, or a
	// nil end where a bounded span is required).
	ErrInvalidSpan = errors.New("storage: invalid key span")
	// ErrInvalidSST is returned by IngestSST for files that are unreadable,
	// corrupt, of the other engine kind's format, or hold keys outside the
	// span being replaced.
	ErrInvalidSST = errors.New("storage: invalid sst")
)

// CheckIterBounds validates NewIter/WriteSST/ApproximateSize bounds, where a
// nil upper means unbounded. lower == upper is a valid, empty span. It and
// CheckKey and CheckDeleteSpan are exported so every Engine (the in-memory
// cache engine of internal/memengine too) applies the same rules.
func CheckIterBounds(lower, upper []byte) error {
	if upper != nil && bytes.Compare(lower, upper) > 0 {
		return fmt.Errorf("%w: lower %q > upper %q", ErrInvalidSpan, lower, upper)
	}
	return nil
}

// CheckKey rejects the empty key for writes. Pebble v2.1.7 mishandles it in
// several places: a columnar data block holding only the empty key panics
// in a background flush (killing the process), and empty span start keys
// trip invariant checks. CockroachDB, Pebble's main user, never writes one,
// so we don't either; every engine enforces it so tests catch violations.
func CheckKey(key []byte) error {
	if len(key) == 0 {
		return ErrEmptyKey
	}
	return nil
}

// minKey is the smallest storable key. Because the empty key cannot be
// stored, a span starting at "" holds exactly the keys of the same span
// starting at minKey; spans are rewritten that way so Pebble never sees an
// empty start key.
var minKey = []byte{0}

// CheckDeleteSpan validates a span that must be bounded (DeleteRange,
// IngestSST), returns its start with "" replaced by minKey, and reports
// whether the span is empty. No engine can express an unbounded range
// deletion, so a nil end is an error rather than a silent no-op a caller
// might mistake for "delete to the end".
func CheckDeleteSpan(start, end []byte) (normStart []byte, empty bool, err error) {
	if end == nil {
		return nil, false, fmt.Errorf("%w: nil end key", ErrInvalidSpan)
	}
	if bytes.Compare(start, end) > 0 {
		return nil, false, fmt.Errorf("%w: start %q > end %q", ErrInvalidSpan, start, end)
	}
	if len(start) == 0 {
		start = minKey
	}
	return start, bytes.Compare(start, end) >= 0, nil
}

// copyBounds copies iterator bounds into one allocation so callers may reuse
// their slices while the iterator is open (Pebble keeps references to them).
// nil-ness is preserved because a nil upper means unbounded.
func copyBounds(lower, upper []byte) (l, u []byte) {
	buf := make([]byte, len(lower)+len(upper))
	if lower != nil {
		l = buf[:len(lower):len(lower)]
		copy(l, lower)
	}
	if upper != nil {
		u = buf[len(lower):]
		copy(u, upper)
	}
	return l, u
}

// copySpan feeds every key/value of r in [lower, upper) to emit, in order, and
// returns the number of pairs emitted.
func copySpan(r Reader, lower, upper []byte, emit func(k, v []byte) error) (n int, err error) {
	it, err := r.NewIter(lower, upper)
	if err != nil {
		return 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		// Our engines never yield the empty key, but r may be any Reader,
		// and Pebble's SST writer can panic on one.
		if err = CheckKey(it.Key()); err != nil {
			break
		}
		if err = emit(it.Key(), it.Value()); err != nil {
			break
		}
		n++
	}
	// Close reports iteration errors (including a failed Value) that made the
	// loop stop early.
	return n, errors.Join(err, it.Close())
}

// checkSSTBounds verifies that an SST's first and last keys lie in
// [lower, upper), so ingesting it cannot clobber a neighbouring span.
func checkSSTBounds(path string, empty bool, first, last, lower, upper []byte) error {
	if empty {
		return nil
	}
	if bytes.Compare(first, lower) < 0 || bytes.Compare(last, upper) >= 0 {
		return fmt.Errorf("%w: %s holds keys [%q, %q] outside span [%q, %q)",
			ErrInvalidSST, path, first, last, lower, upper)
	}
	return nil
}

// closedSnapshot stands in for a snapshot requested from a closed engine,
// since NewSnapshot has no error return.
type closedSnapshot struct{}

func (closedSnapshot) Get([]byte) ([]byte, bool, error)      { return nil, false, ErrClosed }
func (closedSnapshot) NewIter(_, _ []byte) (Iterator, error) { return nil, ErrClosed }
func (closedSnapshot) Close() error                          { return nil }
