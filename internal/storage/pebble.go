package storage

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleEngine implements Engine on a Pebble DB.
type pebbleEngine struct {
	db *pebble.DB
	// opts are the options the DB was opened with (defaults filled); they
	// carry the comparer and key schemas needed to write and read SSTs the
	// DB will accept.
	opts *pebble.Options
	// closed turns use-after-close into ErrClosed; Pebble would panic.
	closed atomic.Bool
}

var _ Engine = (*pebbleEngine)(nil)

// OpenPebble opens (creating if needed) a Pebble store in dir.
func OpenPebble(dir string, opts PebbleOptions) (Engine, error) {
	return openPebble(dir, opts)
}

func openPebble(dir string, opts PebbleOptions) (*pebbleEngine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	po := opts.pebbleOptions()
	cache := pebble.NewCache(opts.CacheSizeBytes)
	// The DB takes its own reference; dropping ours lets Close free the cache.
	defer cache.Unref()
	po.Cache = cache
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("storage: open pebble at %s: %w", dir, err)
	}
	return &pebbleEngine{db: db, opts: po}, nil
}

func (e *pebbleEngine) Get(key []byte) ([]byte, bool, error) {
	if e.closed.Load() {
		return nil, false, ErrClosed
	}
	if len(key) == 0 {
		return nil, false, nil // never stored; keep it away from Pebble
	}
	return finishGet(e.db.Get(key))
}

// finishGet turns Pebble's zero-copy Get result into an owned copy: the one
// allocation a Get needs. A found empty value is returned as a non-nil empty
// slice (make of length 0 does not allocate).
func finishGet(v []byte, closer io.Closer, err error) ([]byte, bool, error) {
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, false, nil
		}
		return nil, false, err
	}
	out := make([]byte, len(v))
	copy(out, v)
	return out, true, closer.Close()
}

func (e *pebbleEngine) NewIter(lower, upper []byte) (Iterator, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	return newPebbleIter(e.db, lower, upper)
}

func (e *pebbleEngine) GetFirst(lower, upper, kdst []byte) ([]byte, []byte, bool, error) {
	if e.closed.Load() {
		return kdst, nil, false, ErrClosed
	}
	opts, ok, err := firstOptions(lower, upper)
	if !ok {
		return kdst, nil, false, err
	}
	// NewIter on the concrete type, so escape analysis can keep opts on
	// the stack (Pebble copies it).
	it, err := e.db.NewIter(&opts)
	return readFirst(it, err, kdst)
}

func (e *pebbleEngine) NewBatch() Batch {
	if e.closed.Load() {
		// NewBatch cannot fail; a pre-closed batch turns every use into
		// ErrClosed.
		return &pebbleBatch{e: e, closed: true}
	}
	return &pebbleBatch{e: e, b: e.db.NewBatch()}
}

func (e *pebbleEngine) NewSnapshot() Snapshot {
	if e.closed.Load() {
		return closedSnapshot{}
	}
	return &pebbleSnapshot{snap: e.db.NewSnapshot()}
}

// ApproximateSize sums the on-disk size of SST data overlapping the span. It
// does not count data still only in the memtable/WAL, so recent writes show
// up only after a flush.
func (e *pebbleEngine) ApproximateSize(lower, upper []byte) (uint64, error) {
	if e.closed.Load() {
		return 0, ErrClosed
	}
	if err := CheckIterBounds(lower, upper); err != nil {
		return 0, err
	}
	if len(lower) == 0 {
		lower = nil // see newPebbleIter
	}
	end := upper
	if end == nil {
		// Pebble needs an explicit end; the last live key stands in for
		// "unbounded". Tombstoned data past it is not counted.
		it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lower})
		if err != nil {
			return 0, err
		}
		if it.Last() {
			end = append([]byte(nil), it.Key()...)
		}
		if err := it.Close(); err != nil {
			return 0, err
		}
		if end == nil {
			return 0, nil
		}
	} else if string(lower) == string(upper) {
		return 0, nil
	}
	// EstimateDiskUsage takes an inclusive end; including the single key at
	// upper is well within the estimate's slack.
	return e.db.EstimateDiskUsage(lower, end)
}

func (e *pebbleEngine) Sync() error {
	if e.closed.Load() {
		return ErrClosed
	}
	// An empty synced LogData record is Pebble's idiom for "fsync the WAL":
	// it is ordered after every earlier commit.
	return e.db.LogData(nil, pebble.Sync)
}

// Flush forces the memtable to an SST. Not part of Engine; tests use it to
// make ApproximateSize see recent writes.
func (e *pebbleEngine) Flush() error {
	if e.closed.Load() {
		return ErrClosed
	}
	return e.db.Flush()
}

func (e *pebbleEngine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	// Pebble reports leaked iterators and snapshots here.
	return e.db.Close()
}
