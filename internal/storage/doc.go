// Package storage owns TideKV's local storage engines: the Engine interface
// that everything above it (Raft log, range data, snapshots) is written
// against, a Pebble-backed implementation for real use (OpenPebble), and an
// in-memory twin for tests (NewMem) that behaves identically for everything in
// the interface and adds fault-injection and crash-simulation hooks.
//
// The package knows nothing about keys' meaning: no key encoding, ranges,
// Raft or MVCC live here. That keeps it a leaf so every other package can
// depend on it without cycles.
//
// Allowed imports: the standard library, github.com/cockroachdb/pebble/v2 (and
// its subpackages) and github.com/google/btree. Nothing from TideKV itself: it
// imports nothing under api/ or internal/ but internal/storage itself (internal/lint).
//
// Semantics shared by every engine (the conformance suite in
// internal/storage/enginetest pins them down, for these two engines and for
// internal/memengine's):
//   - Keys order bytewise (bytes.Compare). The empty key cannot be stored:
//     Set and Delete reject it with ErrEmptyKey, because Pebble v2.1.7 has
//     bugs around it (one panics in a background flush). It is still a fine
//     bound: a span starting at "" starts before every storable key.
//   - A nil upper bound means "unbounded"; a non-nil empty upper bound is the
//     empty key and so admits nothing. DeleteRange and IngestSST need a
//     non-nil end; spans with start >= end are empty.
//   - Iterators and snapshots are point-in-time: an iterator opened on an
//     Engine does not see writes committed after it was opened.
//   - Iterator errors surface as Valid()==false and then from Close.
//   - A Batch may be committed at most once, whether or not Commit succeeds.
//   - SST files are engine-kind specific: files from a Pebble engine's
//     WriteSST ingest into Pebble engines, files from a MemEngine's WriteSST
//     into MemEngines and the memory engines of internal/memengine, which
//     share its format (WriteMemSST, ReadMemSST). Every WriteSST accepts any
//     Reader as source.
//   - Using an engine, snapshot or batch after Close returns ErrClosed instead
//     of panicking; closing an engine with open iterators or snapshots reports
//     the leak as an error.
package storage
