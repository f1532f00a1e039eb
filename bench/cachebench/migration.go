package cachebench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/storage"
)

// MigrationConfig is the migration experiment's knobs.
type MigrationConfig struct {
	// Keys is how many distinct keys the first node holds before the first
	// migration, each with a value of ValueBytes bytes.
	Keys, ValueBytes int
	// Migrations is how many scale-outs run, each moving the lower half of
	// the largest span to a new node (7: the cache grows from 1 to 8 nodes,
	// as in the paper's run at the lower query rate).
	Migrations int
	// Rounds is how many times the whole sequence runs per index; each
	// migration reports its fastest round, the one least disturbed by
	// other work on a shared machine.
	Rounds int
}

// DefaultMigrationConfig is the paper's 64K keys, values of 100 bytes, 7
// migrations, 3 rounds: a few seconds for the five indexes.
func DefaultMigrationConfig() MigrationConfig {
	return MigrationConfig{Keys: 64 << 10, ValueBytes: 100, Migrations: 7, Rounds: 3}
}

// Validate returns one sentence naming the first bad value, or nil.
func (c MigrationConfig) Validate() error {
	switch {
	case c.Keys < 2:
		return fmt.Errorf("migration: at least 2 keys are needed to split, got %d", c.Keys)
	case c.ValueBytes < 0:
		return fmt.Errorf("migration: value size must not be negative, got %d", c.ValueBytes)
	case c.Migrations < 1:
		return fmt.Errorf("migration: at least one migration, got %d", c.Migrations)
	case c.Keys < 2<<c.Migrations:
		// Each migration halves a span; below this the last ones would
		// find a span of one key, which cannot split.
		return fmt.Errorf("migration: %d migrations need at least %d keys, got %d", c.Migrations, 2<<c.Migrations, c.Keys)
	case c.Rounds < 1:
		return fmt.Errorf("migration: at least one round, got %d", c.Rounds)
	}
	return nil
}

// IndexVariant is one index the paper compares, as a memory engine config.
type IndexVariant struct {
	Name   string
	Config memengine.Config
}

// PaperIndexes are the paper's five: the B+-tree, extendible hashing with
// 100, 300 and 500 records a bucket, and the counting Bloom filter.
func PaperIndexes() []IndexVariant {
	out := []IndexVariant{{Name: "btree", Config: withIndex(memengine.BTree, 0)}}
	for _, r := range []int{100, 300, 500} {
		out = append(out, IndexVariant{Name: fmt.Sprint("eh", r), Config: withIndex(memengine.ExtendibleHash, r)})
	}
	return append(out, IndexVariant{Name: "cbf", Config: withIndex(memengine.CountingBloom, 0)})
}

func withIndex(ix memengine.Index, bucketRecords int) memengine.Config {
	c := memengine.DefaultConfig()
	c.Index = ix
	if bucketRecords > 0 {
		c.BucketRecords = bucketRecords
	}
	return c
}

// Migration is one move of a span's lower half to a new node. Split reads
// the span to find its median key (what a split does), Extract writes the
// lower half from a snapshot into an SST (what a snapshot send does),
// Delete clears it at the source and Ingest loads it at the destination.
type Migration struct {
	Keys    int           `json:"keys"`
	Split   time.Duration `json:"split_ns"`
	Extract time.Duration `json:"extract_ns"`
	Delete  time.Duration `json:"delete_ns"`
	Ingest  time.Duration `json:"ingest_ns"`
	// SourceKeys is what the source node held before the move: the hashed
	// indexes pay for all of it, the B+-tree only for the span.
	SourceKeys int `json:"source_keys"`
}

// Total is the whole move.
func (m Migration) Total() time.Duration { return m.Split + m.Extract + m.Delete + m.Ingest }

// MigrationResult is one index's migrations (each its fastest round).
type MigrationResult struct {
	Index      string
	Migrations []Migration
}

// Total is the sum of the migrations.
func (r MigrationResult) Total() time.Duration {
	var t time.Duration
	for _, m := range r.Migrations {
		t += m.Total()
	}
	return t
}

// RunMigration runs the sequence cfg.Rounds times on fresh engines of index
// v, with SST files in dir, and keeps each migration's fastest round.
func RunMigration(cfg MigrationConfig, v IndexVariant, dir string) (MigrationResult, error) {
	if err := cfg.Validate(); err != nil {
		return MigrationResult{}, err
	}
	res := MigrationResult{Index: v.Name}
	for round := 0; round < cfg.Rounds; round++ {
		c, err := migrateAll(cfg, v.Config, dir)
		if cerr := c.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return MigrationResult{}, fmt.Errorf("migration %s: %w", v.Name, err)
		}
		for i, m := range c.done {
			if round == 0 {
				res.Migrations = append(res.Migrations, m)
			} else if m.Total() < res.Migrations[i].Total() {
				res.Migrations[i] = m
			}
		}
	}
	return res, nil
}

// span is a range of stored keys [lo, hi) held by one node.
type span struct {
	lo, hi []byte
	node   int
	keys   int
}

// migCluster is one run's nodes, spans and finished migrations.
type migCluster struct {
	nodes []*memengine.Engine
	spans []span
	done  []Migration
	held  []int // keys per node
}

func (c *migCluster) close() error {
	var errs []error
	for _, e := range c.nodes {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}

// benchSpace is the key space the keys are stored in: hashed, as a cache
// key space is, so a span's keys are in hash order like a range's.
var benchSpace = keyspace.Codec{ID: 1, Mode: keyspace.Hashed}

// storedKey is the stored key of the i-th key.
func storedKey(i int) []byte { return benchSpace.Encode(fmt.Appendf(nil, "key%08d", i)) }

// migrateAll loads cfg.Keys keys on one node and runs the migrations.
func migrateAll(cfg MigrationConfig, ec memengine.Config, dir string) (*migCluster, error) {
	c := &migCluster{}
	first, err := c.addNode(ec)
	if err != nil {
		return c, err
	}
	if err := load(first, cfg.Keys, cfg.ValueBytes); err != nil {
		return c, err
	}
	lo, hi := keyspace.Span(benchSpace.ID)
	c.spans = []span{{lo: lo, hi: hi, node: 0, keys: cfg.Keys}}
	c.held = []int{cfg.Keys}
	for i := 0; i < cfg.Migrations; i++ {
		dst, err := c.addNode(ec)
		if err != nil {
			return c, err
		}
		c.held = append(c.held, 0)
		// Garbage from the fill or the previous move would otherwise be
		// collected during this one and billed to it.
		runtime.GC()
		m, err := c.migrate(c.largest(), dst, filepath.Join(dir, fmt.Sprintf("migration-%d.sst", i)))
		if err != nil {
			return c, err
		}
		c.done = append(c.done, m)
	}
	return c, nil
}

func (c *migCluster) addNode(ec memengine.Config) (*memengine.Engine, error) {
	e, err := memengine.New(ec)
	if err != nil {
		return nil, err
	}
	c.nodes = append(c.nodes, e)
	return e, nil
}

func load(e storage.Engine, keys, valueBytes int) error {
	val := make([]byte, valueBytes)
	b := e.NewBatch()
	defer b.Close()
	for i := 0; i < keys; i++ {
		if err := b.Set(storedKey(i), val); err != nil {
			return err
		}
	}
	return b.Commit(false)
}

// largest is the index of the span with most keys (the first on a tie):
// the fullest bucket the paper splits.
func (c *migCluster) largest() int {
	best := 0
	for i, s := range c.spans {
		if s.keys > c.spans[best].keys {
			best = i
		}
	}
	return best
}

// migrate moves the lower half of span i to node dst (the last node added)
// and splits the span in two.
func (c *migCluster) migrate(i int, dst storage.Engine, path string) (Migration, error) {
	s := c.spans[i]
	src := c.nodes[s.node]
	m := Migration{SourceKeys: c.held[s.node]}
	start := time.Now()
	mid, err := median(src, s)
	if err != nil {
		return m, err
	}
	m.Split = time.Since(start)

	start = time.Now()
	snap := src.NewSnapshot()
	stats, err := src.WriteSST(snap, s.lo, mid, path)
	if cerr := snap.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return m, err
	}
	m.Extract, m.Keys = time.Since(start), stats.Keys

	start = time.Now()
	b := src.NewBatch()
	err = b.DeleteRange(s.lo, mid)
	if err == nil {
		err = b.Commit(false)
	}
	_ = b.Close()
	if err != nil {
		return m, err
	}
	m.Delete = time.Since(start)

	start = time.Now()
	if err := dst.IngestSST(path, s.lo, mid); err != nil {
		_ = os.Remove(path)
		return m, err
	}
	m.Ingest = time.Since(start)

	to := len(c.nodes) - 1
	c.spans[i] = span{lo: mid, hi: s.hi, node: s.node, keys: s.keys - m.Keys}
	c.spans = append(c.spans, span{lo: s.lo, hi: mid, node: to, keys: m.Keys})
	c.held[s.node] -= m.Keys
	c.held[to] += m.Keys
	return m, nil
}

// median reads span s on e up to its middle key, which starts the upper
// half: the keys all have the same size, so the median by count is the
// median by bytes a size split looks for.
func median(e storage.Reader, s span) ([]byte, error) {
	it, err := e.NewIter(s.lo, s.hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n == s.keys/2 {
			return bytes.Clone(it.Key()), nil
		}
		n++
	}
	return nil, fmt.Errorf("span [%x, %x) holds %d keys, expected %d", s.lo, s.hi, n, s.keys)
}
