package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// PebbleOptions configures OpenPebble. Start from DefaultPebbleOptions; the
// zero value does not validate.
type PebbleOptions struct {
	// CacheSizeBytes is the size, in bytes, of the block cache holding
	// uncompressed SST blocks (data, index and bloom filter blocks). Reads
	// that miss it go to the OS page cache or disk. Must be > 0.
	// Default 512 MiB: a node of a local cluster keeps its working set cached.
	CacheSizeBytes int64

	// MemTableSizeBytes is the size, in bytes, of one memtable: the in-memory
	// write buffer flushed to an L0 SST when full. Larger memtables absorb
	// more overwrites and make fewer, larger L0 files, at the cost of memory
	// (up to 2x this while one flushes) and WAL replay time on restart.
	// Must be in [1 MiB, 4 GiB). Default 64 MiB.
	MemTableSizeBytes uint64

	// MaxOpenFiles caps the file descriptors Pebble keeps open, mostly for
	// SSTs in its table cache. Must be >= 16. Default 1000.
	MaxOpenFiles int

	// VerboseLogging routes Pebble's informational log lines and every engine
	// event (flushes, compactions, WAL and manifest rotation) to the standard
	// library logger. When false (the default) only errors are written, to
	// stderr; fatal errors still terminate the process either way, as Pebble
	// requires.
	VerboseLogging bool

	// FS is the filesystem the engine's files live on; nil is the OS's.
	// Fault injection passes one that can be made slow (DiskFaults).
	FS vfs.FS
}

// DefaultPebbleOptions returns the options TideKV runs with unless
// configured otherwise.
func DefaultPebbleOptions() PebbleOptions {
	return PebbleOptions{
		CacheSizeBytes:    512 << 20,
		MemTableSizeBytes: 64 << 20,
		MaxOpenFiles:      1000,
	}
}

// Validate reports the first invalid field, if any.
func (o PebbleOptions) Validate() error {
	switch {
	case o.CacheSizeBytes <= 0:
		return fmt.Errorf("storage: CacheSizeBytes must be > 0, got %d", o.CacheSizeBytes)
	case o.MemTableSizeBytes < 1<<20:
		return fmt.Errorf("storage: MemTableSizeBytes must be >= 1 MiB, got %d", o.MemTableSizeBytes)
	case o.MemTableSizeBytes >= 4<<30:
		// Pebble's arena offsets are 32-bit.
		return fmt.Errorf("storage: MemTableSizeBytes must be < 4 GiB, got %d", o.MemTableSizeBytes)
	case o.MaxOpenFiles < 16:
		return fmt.Errorf("storage: MaxOpenFiles must be >= 16, got %d", o.MaxOpenFiles)
	}
	return nil
}

// quietLogger drops Pebble's chatter but keeps errors visible. Fatalf must not
// return: Pebble calls it when its commit pipeline is wedged and assumes the
// process dies, exactly as pebble.DefaultLogger does.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	_ = log.Output(2, "pebble: "+fmt.Sprintf(format, args...))
}
func (quietLogger) Fatalf(format string, args ...any) {
	_ = log.Output(2, "pebble: FATAL: "+fmt.Sprintf(format, args...))
	os.Exit(1)
}

// pebbleOptions translates our options into Pebble's, with defaults filled in
// so the result can also build SST writer/reader options.
func (o PebbleOptions) pebbleOptions() *pebble.Options {
	po := &pebble.Options{
		MemTableSize: o.MemTableSizeBytes,
		MaxOpenFiles: o.MaxOpenFiles,
		// Newest format: columnar blocks, and every store created by this
		// binary agrees on the SST table format, so WriteSST output from one
		// node ingests on any other.
		FormatMajorVersion: pebble.FormatNewest,
		FS:                 o.FS,
	}
	if o.VerboseLogging {
		po.Logger = pebble.DefaultLogger
		l := pebble.MakeLoggingEventListener(pebble.DefaultLogger)
		po.EventListener = &l
	} else {
		po.Logger = quietLogger{}
	}
	for i := range po.Levels {
		// Pebble ships with no filters; without them a Get for an absent key
		// reads a data block from every level. 10 bits/key ≈ 1% false
		// positives, the usual LevelDB/RocksDB trade-off.
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		po.Levels[i].FilterType = pebble.TableFilter
	}
	po.EnsureDefaults()
	return po
}

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

func (e *pebbleEngine) WriteSST(r Reader, lower, upper []byte, path string) (SSTStats, error) {
	if e.closed.Load() {
		return SSTStats{}, ErrClosed
	}
	if err := CheckIterBounds(lower, upper); err != nil {
		return SSTStats{}, err
	}
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return SSTStats{}, fmt.Errorf("storage: create sst: %w", err)
	}
	// Level 0 and the DB's own table format are exactly what Pebble's ingest
	// tests use; IngestSST rejects formats outside the DB's supported range.
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), e.opts.MakeWriterOptions(0, e.db.TableFormat()))
	n, err := copySpan(r, lower, upper, w.Set)
	// Close finishes and fsyncs the file (or aborts it if the writer failed).
	err = errors.Join(err, w.Close())
	if err != nil {
		_ = os.Remove(path)
		return SSTStats{}, fmt.Errorf("storage: write sst %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return SSTStats{}, err
	}
	return SSTStats{Keys: n, Bytes: fi.Size()}, nil
}

func (e *pebbleEngine) IngestSST(path string, lower, upper []byte) error {
	if e.closed.Load() {
		return ErrClosed
	}
	clearFrom, emptySpan, err := CheckDeleteSpan(lower, upper)
	if err != nil {
		return err
	}
	// Pebble would happily ingest keys outside the span, silently clobbering
	// a neighbouring range; check before touching anything.
	if err := e.checkSST(path, clearFrom, upper); err != nil {
		return err
	}
	if !emptySpan {
		b := e.db.NewBatch()
		_ = b.DeleteRange(clearFrom, upper, nil)
		err := b.Commit(pebble.Sync)
		_ = b.Close()
		if err != nil {
			return fmt.Errorf("storage: clear span before ingest: %w", err)
		}
	}
	// Between the cleared span and the ingest a concurrent reader can see the
	// span empty, and a crash here leaves it empty (durably). Callers
	// (snapshot application) re-apply in either case.
	if err := e.db.Ingest(context.Background(), []string{path}); err != nil {
		return fmt.Errorf("storage: ingest %s: %w", path, err)
	}
	// Pebble removes the original after linking it in, except for an empty
	// file, which it skips entirely. Remove that too so the file's fate does
	// not depend on its contents; failing to is harmless.
	_ = os.Remove(path)
	return nil
}

// checkSST opens path as a Pebble SST and verifies it is a plain point-key
// table whose keys lie in [lower, upper).
func (e *pebbleEngine) checkSST(path string, lower, upper []byte) (retErr error) {
	wrap := func(err error) error {
		return fmt.Errorf("%w: %s: %v", ErrInvalidSST, path, err)
	}
	f, err := vfs.Default.Open(path)
	if err != nil {
		return fmt.Errorf("storage: open sst: %w", err)
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return wrap(err)
	}
	r, err := sstable.NewReader(context.Background(), readable, e.opts.MakeReaderOptions())
	if err != nil {
		_ = readable.Close()
		return wrap(err)
	}
	defer func() { retErr = errors.Join(retErr, r.Close()) }()

	it, err := r.NewIter(sstable.NoTransforms, nil, nil, sstable.AssertNoBlobHandles)
	if err != nil {
		return wrap(err)
	}
	// A full pass reads every block, so every block checksum is verified
	// before the file becomes the range's data: a corrupt block found later
	// would fail reads of live data instead of this ingestion.
	var first, last []byte
	kv := it.First()
	empty := kv == nil
	if !empty {
		first = append([]byte(nil), kv.K.UserKey...)
	}
	for ; kv != nil; kv = it.Next() {
		last = append(last[:0], kv.K.UserKey...)
		if _, _, err := kv.Value(nil); err != nil {
			_ = it.Close()
			return wrap(err)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return wrap(err)
	}
	if err := checkSSTBounds(path, empty, first, last, lower, upper); err != nil {
		return err
	}
	// WriteSST never writes range deletions or range keys, and the mem twin
	// could not represent them; refuse them so both engines agree.
	rd, err := r.NewRawRangeDelIter(context.Background(), sstable.NoFragmentTransforms, sstable.NoReadEnv)
	if err != nil {
		return wrap(err)
	}
	if rd != nil {
		rd.Close()
		return wrap(errors.New("contains range deletions"))
	}
	rk, err := r.NewRawRangeKeyIter(context.Background(), sstable.NoFragmentTransforms, sstable.NoReadEnv)
	if err != nil {
		return wrap(err)
	}
	if rk != nil {
		rk.Close()
		return wrap(errors.New("contains range keys"))
	}
	return nil
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

// pebbleBatch wraps pebble.Batch, adding the at-most-once Commit rule and
// use-after-Close protection (a closed pebble.Batch goes back to a pool).
type pebbleBatch struct {
	e         *pebbleEngine
	b         *pebble.Batch
	count     int
	committed bool
	closed    bool
}

func (b *pebbleBatch) writable() error {
	switch {
	case b.closed:
		return ErrClosed
	case b.committed:
		return ErrBatchCommitted
	}
	return nil
}

func (b *pebbleBatch) Set(key, value []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := b.b.Set(key, value, nil); err != nil {
		return err
	}
	b.count++
	return nil
}

func (b *pebbleBatch) Delete(key []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := b.b.Delete(key, nil); err != nil {
		return err
	}
	b.count++
	return nil
}

func (b *pebbleBatch) DeleteRange(start, end []byte) error {
	if err := b.writable(); err != nil {
		return err
	}
	start, empty, err := CheckDeleteSpan(start, end)
	if err != nil || empty {
		// An empty span is dropped rather than handed to Pebble, whose
		// fragmenter treats start >= end as an invariant violation.
		return err
	}
	if err := b.b.DeleteRange(start, end, nil); err != nil {
		return err
	}
	b.count++
	return nil
}

func (b *pebbleBatch) Commit(sync bool) error {
	if err := b.writable(); err != nil {
		return err
	}
	if b.e.closed.Load() {
		return ErrClosed
	}
	b.committed = true
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	return b.b.Commit(opt)
}

func (b *pebbleBatch) Empty() bool { return b.count == 0 }
func (b *pebbleBatch) Count() int  { return b.count }

func (b *pebbleBatch) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	// Close returns the batch to Pebble's pool; the guard above keeps a
	// second Close from recycling it twice.
	return b.b.Close()
}

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
