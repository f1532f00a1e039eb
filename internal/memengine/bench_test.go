package memengine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

// benchKeys is the paper's key count: 64K distinct keys.
const benchKeys = 64 << 10

// benchConfigs are the indexes the paper compares: the B+-tree, extendible
// hashing at 100, 300 and 500 records a bucket, and the counting Bloom
// filter at its default size.
func benchConfigs() []struct {
	name string
	cfg  Config
} {
	var out []struct {
		name string
		cfg  Config
	}
	add := func(name string, mut func(*Config)) {
		c := DefaultConfig()
		mut(&c)
		out = append(out, struct {
			name string
			cfg  Config
		}{name, c})
	}
	add("btree", func(c *Config) { c.Index = BTree })
	for _, r := range []int{100, 300, 500} {
		add(fmt.Sprint("exthash", r), func(c *Config) { c.Index, c.BucketRecords = ExtendibleHash, r })
	}
	add("cbf", func(c *Config) { c.Index = CountingBloom })
	return out
}

func benchKey(i int) []byte { return fmt.Appendf(nil, "user/%010d", i) }

// loadedEngine returns an engine holding benchKeys keys with 100-byte values.
func loadedEngine(b *testing.B, c Config) *Engine {
	b.Helper()
	e, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	setRange(b, e, 0, benchKeys)
	return e
}

func setRange(b *testing.B, e storage.Engine, from, to int) {
	b.Helper()
	val := make([]byte, 100)
	batch := e.NewBatch()
	for i := from; i < to; i++ {
		_ = batch.Set(benchKey(i), val)
	}
	if err := batch.Commit(false); err != nil {
		b.Fatal(err)
	}
	_ = batch.Close()
}

// BenchmarkGet reads random keys that are there (hit) or fall between them
// (miss). storage.MemEngine (google/btree) is there for reference.
func BenchmarkGet(b *testing.B) {
	engines := map[string]storage.Engine{}
	var names []string
	for _, bc := range benchConfigs() {
		engines[bc.name] = loadedEngine(b, bc.cfg)
		names = append(names, bc.name)
	}
	ref := storage.NewMem()
	setRange(b, ref, 0, benchKeys)
	engines["storage.MemEngine"] = ref
	names = append(names, "storage.MemEngine")

	hits := make([][]byte, benchKeys)
	misses := make([][]byte, benchKeys)
	for i := range hits {
		hits[i] = benchKey(i)
		misses[i] = append(benchKey(i), '~')
	}
	for _, name := range names {
		for _, probe := range []struct {
			name  string
			keys  [][]byte
			found bool
		}{{"hit", hits, true}, {"miss", misses, false}} {
			b.Run(name+"/"+probe.name, func(b *testing.B) {
				e := engines[name]
				rng := rand.New(rand.NewPCG(1, 1))
				b.ReportAllocs()
				for b.Loop() {
					if _, ok, err := e.Get(probe.keys[rng.IntN(benchKeys)]); ok != probe.found || err != nil {
						b.Fatal("Get", ok, err)
					}
				}
			})
		}
	}
}

// BenchmarkSet overwrites random keys of a full engine, one committed batch
// each, as single writes arrive.
func BenchmarkSet(b *testing.B) {
	val := make([]byte, 100)
	for _, bc := range benchConfigs() {
		b.Run(bc.name, func(b *testing.B) {
			e := loadedEngine(b, bc.cfg)
			rng := rand.New(rand.NewPCG(1, 1))
			b.ReportAllocs()
			for b.Loop() {
				batch := e.NewBatch()
				_ = batch.Set(benchKey(rng.IntN(benchKeys)), val)
				if err := batch.Commit(false); err != nil {
					b.Fatal(err)
				}
				_ = batch.Close()
			}
		})
	}
}

// BenchmarkMigrateHalf moves the lower half of the keys off an engine, as a
// split-and-move does: "read" is the ordered read of the span that ships it
// (what WriteSST does), "read+delete" adds clearing it from the source.
// Each op reports its time for 32K keys.
func BenchmarkMigrateHalf(b *testing.B) {
	lo, hi := benchKey(0), benchKey(benchKeys/2)
	for _, bc := range benchConfigs() {
		e := loadedEngine(b, bc.cfg)
		read := func(b *testing.B) {
			it, err := e.NewIter(lo, hi)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for ok := it.First(); ok; ok = it.Next() {
				n++
			}
			if err := it.Close(); err != nil || n != benchKeys/2 {
				b.Fatal("read", n, err)
			}
		}
		b.Run(bc.name+"/read", func(b *testing.B) {
			for b.Loop() {
				read(b)
			}
		})
		b.Run(bc.name+"/read+delete", func(b *testing.B) {
			for b.Loop() {
				read(b)
				batch := e.NewBatch()
				_ = batch.DeleteRange(lo, hi)
				if err := batch.Commit(false); err != nil {
					b.Fatal(err)
				}
				_ = batch.Close()
				b.StopTimer()
				setRange(b, e, 0, benchKeys/2)
				b.StartTimer()
			}
		})
	}
}
