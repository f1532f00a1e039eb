// Package mvcc owns TideKV's versioned key layout over a storage engine:
// every write is a version of its key at a hybrid-logical-clock timestamp
// (api/hlc), a delete is a version too (a tombstone), and a read at a
// timestamp sees, per key, the newest version at or below it. On that it
// builds point reads and scans at a timestamp, writes into a batch,
// garbage collection of the versions no read at or above a safe point can
// see, span sizes (live and total), and split keys that never separate
// two versions of one key.
//
// Layout (key.go, value.go): a version of user key k at t is stored under
// escape(k) 0x00 0x01 ^encode(t), so under the engines' bytewise order user
// keys keep their order, a key's versions are contiguous, and the newest
// comes first; its value is a two-byte header (format, flags: tombstone,
// expires, and room for a transaction's intent), the expiry if it has one,
// then the user's value. A value expires at an absolute HLC wall time: a
// read at or after it finds no value (Version.LiveAt, Scan, ScanNewest),
// so readers at one time agree; the version stays stored until GC.
//
// The package is given user keys and spans and knows nothing of ranges,
// Raft or the engine's other key classes; a caller that shares an engine
// with other keys versions keys it has already prefixed (keys.VersionedKey)
// and bounds every span. Whether a read or write at a timestamp is allowed
// (below the GC threshold, a closed timestamp, a newer version) is the
// caller's decision too. internal/raftstore stores the data of ranges on
// the versioned layout with it (docs/transactions.md, integration step 2).
//
// It imports api/hlc and internal/storage only.
package mvcc
