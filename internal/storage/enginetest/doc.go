// Package enginetest is the conformance suite every storage.Engine passes:
// the behaviour internal/storage documents (iterator contract, empty-key
// rule, DeleteRange, atomic batches, isolated snapshots, SST shipping,
// ApproximateSize, use after Close), checked against any engine through a
// constructor. internal/storage runs it for Pebble and its MemEngine twin,
// internal/memengine for each of its indexes, so no engine is held to a
// weaker copy of the rules.
//
// It also exports the small helpers the suite is written with (Apply, Scan,
// WantGet, ...) for engine-specific tests. Only tests import it.
//
// It imports nothing under api/ or internal/ but internal/storage itself (internal/lint).
package enginetest
