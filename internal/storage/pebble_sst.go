package storage

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

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
