package enginetest

import (
	"errors"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

// Kind is one engine implementation under test.
type Kind struct {
	Name string
	// New returns a fresh, empty engine.
	New func(tb testing.TB) storage.Engine
	// Flush, if set, moves buffered writes to where the engine keeps them at
	// rest (Pebble: memtable to SSTs), so the suite reaches both paths.
	Flush func(tb testing.TB, e storage.Engine)
}

// Open returns a fresh engine of kind k. Unless the test closed it, it is
// closed at cleanup and must not report leaks.
func (k Kind) Open(tb testing.TB) storage.Engine {
	e := k.New(tb)
	tb.Cleanup(func() {
		if err := e.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
			tb.Errorf("close at cleanup: %v", err)
		}
	})
	return e
}

func (k Kind) flush(tb testing.TB, e storage.Engine) {
	tb.Helper()
	if k.Flush != nil {
		k.Flush(tb, e)
	}
}

// PebbleOptions are small Pebble options for tests.
func PebbleOptions() storage.PebbleOptions {
	o := storage.DefaultPebbleOptions()
	o.CacheSizeBytes = 8 << 20
	o.MemTableSizeBytes = 4 << 20
	return o
}

// Pebble is the production engine.
var Pebble = Kind{
	Name: "pebble",
	New: func(tb testing.TB) storage.Engine {
		e, err := storage.OpenPebble(tb.TempDir(), PebbleOptions())
		if err != nil {
			tb.Fatal(err)
		}
		return e
	},
	// Flushing pushes memtable data into SSTs, where Pebble's empty-key
	// bugs live.
	Flush: func(tb testing.TB, e storage.Engine) {
		if err := e.(interface{ Flush() error }).Flush(); err != nil {
			tb.Fatal(err)
		}
	},
}

// Mem is internal/storage's in-memory twin of Pebble.
var Mem = Kind{
	Name: "mem",
	New:  func(testing.TB) storage.Engine { return storage.NewMem() },
}

// Run runs the conformance suite against engines of kind k, one subtest per
// property. foreign is a kind whose SST files k must refuse (another file
// format) and whose engines k's WriteSST must read from like any Reader.
func Run(t *testing.T, k, foreign Kind) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, k, foreign Kind)
	}{
		{"GetSetDelete", testGetSetDelete},
		{"IteratorBoundsAndSeekGE", testIteratorBoundsAndSeekGE},
		{"EmptyKey", testEmptyKey},
		{"IteratorLargeScan", testIteratorLargeScan},
		{"IteratorIsPointInTime", testIteratorIsPointInTime},
		{"DeleteRange", testDeleteRange},
		{"BatchSemantics", testBatchSemantics},
		{"BatchAtomicity", testBatchAtomicity},
		{"SnapshotIsolation", testSnapshotIsolation},
		{"SSTRoundTrip", testSSTRoundTrip},
		{"UseAfterClose", testUseAfterClose},
		{"CloseReportsLeaks", testCloseReportsLeaks},
		{"ApproximateSizeBasics", testApproximateSizeBasics},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, k, foreign) })
	}
}
