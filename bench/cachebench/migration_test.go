package cachebench

import (
	"bytes"
	"testing"

	"github.com/tidekv/tidekv/api/keyspace"
)

// Every index moves each key exactly once: after the migrations every key
// is on exactly one node, each node holds exactly its spans' keys (the
// source kept none of what it sent), and each move took half a span.
func TestMigrationMovesEachKeyOnce(t *testing.T) {
	cfg := MigrationConfig{Keys: 1000, ValueBytes: 8, Migrations: 5, Rounds: 1}
	for _, v := range PaperIndexes() {
		t.Run(v.Name, func(t *testing.T) {
			c, err := migrateAll(cfg, v.Config, t.TempDir())
			t.Cleanup(func() { _ = c.close() })
			if err != nil {
				t.Fatal(err)
			}
			if len(c.nodes) != cfg.Migrations+1 || len(c.done) != cfg.Migrations {
				t.Fatalf("%d nodes, %d migrations", len(c.nodes), len(c.done))
			}
			if m := c.done[0]; m.Keys != cfg.Keys/2 || m.SourceKeys != cfg.Keys {
				t.Fatalf("first migration moved %d of %d keys", m.Keys, m.SourceKeys)
			}
			seen := map[string]int{}
			for n, e := range c.nodes {
				lo, hi := keyspace.Span(benchSpace.ID)
				it, err := e.NewIter(lo, hi)
				if err != nil {
					t.Fatal(err)
				}
				for ok := it.First(); ok; ok = it.Next() {
					k := string(it.Key())
					seen[k]++
					if s := c.spanOf(it.Key()); s.node != n {
						t.Errorf("key %x on node %d, its span [%x, %x) is on node %d", k, n, s.lo, s.hi, s.node)
					}
				}
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < cfg.Keys; i++ {
				if n := seen[string(storedKey(i))]; n != 1 {
					t.Fatalf("key %d is on %d nodes", i, n)
				}
			}
			if len(seen) != cfg.Keys {
				t.Fatalf("%d keys stored, want %d", len(seen), cfg.Keys)
			}
		})
	}
}

func (c *migCluster) spanOf(key []byte) span {
	for _, s := range c.spans {
		if bytes.Compare(key, s.lo) >= 0 && bytes.Compare(key, s.hi) < 0 {
			return s
		}
	}
	return span{node: -1}
}

func TestMigrationConfigValidate(t *testing.T) {
	if err := DefaultMigrationConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []MigrationConfig{
		{Keys: 1, Migrations: 1, Rounds: 1},
		{Keys: 100, ValueBytes: -1, Migrations: 1, Rounds: 1},
		{Keys: 100, Migrations: 0, Rounds: 1},
		{Keys: 100, Migrations: 7, Rounds: 1},
		{Keys: 1000, Migrations: 7, Rounds: 0},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
