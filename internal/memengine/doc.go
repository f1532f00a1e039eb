// Package memengine owns TideKV's in-memory storage engine, the store of
// cache key spaces: a storage.Engine that keeps every key in memory, in one
// of three indexes chosen by Config.Index, after the elastic key-value
// cache paper (Chiu, Shetty, Agrawal) that compares them by what moving a
// range off a node costs:
//
//   - BTree, a B+-tree with linked leaves: reading a span descends once to
//     its start and sweeps the leaves to its end, paying only for the span.
//   - ExtendibleHash, extendible hashing with Config.BucketRecords records a
//     bucket: point reads take one hash and one bucket scan, but a span's
//     keys can be in any bucket, so reading it visits every bucket and sorts
//     what it found.
//   - CountingBloom, a counting Bloom filter of 4-bit counters in front of an
//     unordered store probed per key: the filter answers most misses
//     without touching the store. A span is read by testing every key of
//     the store against it, then sorting (see cbfIndex for why the filter
//     itself cannot narrow a span of byte-string keys).
//
// Ordered iteration works over every index; over the hashed two it costs a
// full pass and a sort when the iterator opens, which is the paper's point.
// ApproximateSize never makes one: it answers from a storage.SizeTally kept
// by every write (exact for the whole engine, a sample for large spans).
//
// Snapshots and iterators are isolated from later writes by versions, not
// copies: each key keeps the values that open readers may still see, so
// taking a snapshot is O(1) and a write while readers are open keeps one
// more version until they close (see entry). Batches apply under the write
// lock, so readers never see part of one.
//
// Nothing is durable. Sync and synced commits succeed and do nothing, and a
// crash loses every key: a cache refills from its origin. Ranges still move
// between nodes as one unit: WriteSST and IngestSST use the MemEngine's SST
// format (storage.WriteMemSST, storage.ReadMemSST), so a range moves between
// any two memory engines (these and storage.MemEngine) as one file.
// Pebble's files are refused, as the other engine kind's are everywhere.
//
// The package is self-contained: it depends on internal/storage for the
// interface and the file format, and nothing in TideKV uses it yet; key
// spaces will choose it per key space (issue 14).
package memengine
