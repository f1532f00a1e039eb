package memengine

import "fmt"

// Index names the structure an engine keeps its keys in. Each has its own
// range-extraction algorithm, which is what moving a range off a node costs.
type Index string

const (
	// BTree is a B+-tree with linked leaves: a span is read by descending to
	// its start and sweeping the leaves to its end.
	BTree Index = "btree"
	// ExtendibleHash is extendible hashing: constant-time point reads, but
	// hashing destroys key order, so reading a span visits every bucket and
	// sorts what it found.
	ExtendibleHash Index = "exthash"
	// CountingBloom is a counting Bloom filter (4-bit counters) in front of
	// an unordered store probed per key; a span is read like the hash's.
	CountingBloom Index = "cbf"
)

// Config is how a memory engine is built. Every field is checked by
// Validate whichever index is chosen, so switching Index never exposes a
// bad value that was lying unused.
type Config struct {
	Index Index
	// BucketRecords is how many records an extendible-hashing bucket holds
	// before it splits (the paper compares 100, 300 and 500). Bigger buckets
	// mean fewer splits and a smaller directory, but longer scans per lookup.
	BucketRecords int
	// CBFCounters is the number of 4-bit counters in the counting Bloom
	// filter, which takes CBFCounters/2 bytes. With n keys and k hashes a
	// lookup of an absent key probes the store with probability about
	// (1 - e^(-k·n/CBFCounters))^k: the default (4 MiB, 4 hashes) keeps
	// that under 1e-4 up to about 200K keys, and near 2% at 1M.
	CBFCounters int
	// CBFHashes is how many counters each key sets.
	CBFHashes int
	// Group, if set, tells the unordered indexes which keys to keep
	// together (nil: each key alone); see Grouping.
	Group Grouping
}

// Grouping places keys of one group alike in the unordered indexes: they
// hash by the group (a prefix of the key), so they share a bucket or a
// store slot, and a span inside one group reads that bucket alone instead
// of the whole index. TideKV's versioned keys group by user key
// (mvcc.KeyGroups): a read, the newest version of a key at or below a
// timestamp, is a span inside one group.
type Grouping interface {
	// GroupLen is the length of key's group, a prefix of key.
	GroupLen(key []byte) int
	// Within reports whether every key in [lower, upper) (nil upper:
	// unbounded) has lower's group.
	Within(lower, upper []byte) bool
}

// The bounds Validate enforces.
const (
	// Below this, a bucket splits so often that the directory grows faster
	// than the number of keys (about n^(1+1/b) slots for b records a bucket).
	minBucketRecords = 8
	maxBucketRecords = 1 << 16
	minCBFCounters   = 64
	// Counter positions are reduced from 32-bit hashes.
	maxCBFCounters = 1 << 32
	maxCBFHashes   = 16
)

// DefaultConfig is a B+-tree, the index the paper found to scale well
// whatever the load; the other indexes' knobs hold the values that served
// them best there (300 records a bucket at the higher query rate).
func DefaultConfig() Config {
	return Config{
		Index:         BTree,
		BucketRecords: 300,
		CBFCounters:   1 << 23,
		CBFHashes:     4,
	}
}

// Validate returns one sentence naming the first bad value, or nil.
func (c Config) Validate() error {
	switch c.Index {
	case BTree, ExtendibleHash, CountingBloom:
	default:
		return fmt.Errorf("memengine: unknown index %q (want %s, %s or %s)", c.Index, BTree, ExtendibleHash, CountingBloom)
	}
	switch {
	case c.BucketRecords < minBucketRecords || c.BucketRecords > maxBucketRecords:
		return fmt.Errorf("memengine: records per bucket must be between %d and %d, got %d", minBucketRecords, maxBucketRecords, c.BucketRecords)
	case c.CBFCounters < minCBFCounters || int64(c.CBFCounters) > maxCBFCounters:
		return fmt.Errorf("memengine: the counting Bloom filter needs between %d and %d counters, got %d", minCBFCounters, maxCBFCounters, c.CBFCounters)
	case c.CBFHashes < 1 || c.CBFHashes > maxCBFHashes:
		return fmt.Errorf("memengine: the counting Bloom filter needs between 1 and %d hashes a key, got %d", maxCBFHashes, c.CBFHashes)
	}
	return nil
}
