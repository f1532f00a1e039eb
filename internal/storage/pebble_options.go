package storage

import (
	"fmt"
	"log"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
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
