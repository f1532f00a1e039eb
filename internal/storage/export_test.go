package storage

import "github.com/cockroachdb/pebble/v2"

// What the external tests (package storage_test, which shares enginetest's
// helpers and so cannot live in this package) reach inside.
var (
	ParseMemSST = parseMemSST
	Castagnoli  = castagnoli
)

const MemSSTMagic = memSSTMagic

// PebbleEngine is the Pebble engine's concrete type, for tests that reach
// Pebble itself.
type PebbleEngine = pebbleEngine

// OpenPebbleEngine is OpenPebble returning the concrete type.
func OpenPebbleEngine(dir string, o PebbleOptions) (*PebbleEngine, error) { return openPebble(dir, o) }

// DB is the engine's Pebble database.
func (e *pebbleEngine) DB() *pebble.DB { return e.db }

// Engines must satisfy the interfaces the lead codes against.
var (
	_ Engine   = (*pebbleEngine)(nil)
	_ Engine   = (*MemEngine)(nil)
	_ Snapshot = (*pebbleSnapshot)(nil)
	_ Snapshot = (*memSnapshot)(nil)
	_ Batch    = (*pebbleBatch)(nil)
	_ Batch    = (*memBatch)(nil)
	_ Iterator = (*pebbleIter)(nil)
	_ Iterator = (*memIter)(nil)
)

// SizeVisits is how many keys and samples ApproximateSize has read.
func (e *MemEngine) SizeVisits() uint64 { return e.size.Visits() }

// SnapshotFirstIter is the iterator a Pebble snapshot's GetFirst calls
// share (nil before the first and after Close).
func SnapshotFirstIter(s Snapshot) *pebble.Iterator { return s.(*pebbleSnapshot).first }
