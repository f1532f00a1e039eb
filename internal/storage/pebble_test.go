package storage_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

func openTestPebble(t testing.TB, dir string) *storage.PebbleEngine {
	t.Helper()
	e, err := storage.OpenPebbleEngine(dir, enginetest.PebbleOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

func TestPebbleOptionsValidate(t *testing.T) {
	if err := storage.DefaultPebbleOptions().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	d := storage.DefaultPebbleOptions()
	if d.CacheSizeBytes != 512<<20 || d.MemTableSizeBytes != 64<<20 || d.VerboseLogging {
		t.Fatalf("unexpected defaults: %+v", d)
	}
	for name, mut := range map[string]func(*storage.PebbleOptions){
		"zero cache":      func(o *storage.PebbleOptions) { o.CacheSizeBytes = 0 },
		"negative cache":  func(o *storage.PebbleOptions) { o.CacheSizeBytes = -1 },
		"tiny memtable":   func(o *storage.PebbleOptions) { o.MemTableSizeBytes = 1 << 10 },
		"huge memtable":   func(o *storage.PebbleOptions) { o.MemTableSizeBytes = 4 << 30 },
		"few open files":  func(o *storage.PebbleOptions) { o.MaxOpenFiles = 2 },
		"zero open files": func(o *storage.PebbleOptions) { o.MaxOpenFiles = 0 },
	} {
		o := storage.DefaultPebbleOptions()
		mut(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, o)
		}
		if _, err := storage.OpenPebble(t.TempDir(), o); err == nil {
			t.Errorf("%s: OpenPebble accepted %+v", name, o)
		}
	}
	if _, err := storage.OpenPebble(t.TempDir(), storage.PebbleOptions{}); err == nil {
		t.Error("zero PebbleOptions accepted")
	}
}

// TestPebbleReopen checks that synced writes, Sync()ed writes and ingested
// files survive close and reopen.
func TestPebbleReopen(t *testing.T) {
	dir := t.TempDir()
	e, err := storage.OpenPebble(dir, enginetest.PebbleOptions())
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Apply(t, e, enginetest.Set("synced", "1"), enginetest.Set("doomed", "x"))
	enginetest.Apply(t, e, enginetest.DelRange("d", "e"))

	batch := e.NewBatch()
	_ = batch.Set(b("nosync-then-sync"), b("2"))
	if err := batch.Commit(false); err != nil {
		t.Fatal(err)
	}
	_ = batch.Close()
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}

	src := storage.NewMem()
	defer src.Close()
	enginetest.SetAll(t, src, enginetest.KV{K: "ingested/1", V: "a"}, enginetest.KV{K: "ingested/2", V: "b"})
	path := filepath.Join(t.TempDir(), "x.sst")
	if _, err := e.WriteSST(src, b("ingested/"), b("ingested0"), path); err != nil {
		t.Fatal(err)
	}
	if err := e.IngestSST(path, b("ingested/"), b("ingested0")); err != nil {
		t.Fatal(err)
	}
	want := enginetest.Scan(t, e, nil, nil)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := openTestPebble(t, dir)
	got := enginetest.Scan(t, e2, nil, nil)
	if !slices.Equal(got, want) {
		t.Fatalf("after reopen:\n got %v\nwant %v", got, want)
	}
	if want := []enginetest.KV{{K: "ingested/1", V: "a"}, {K: "ingested/2", V: "b"}, {K: "nosync-then-sync", V: "2"}, {K: "synced", V: "1"}}; !slices.Equal(got, want) {
		t.Fatalf("unexpected contents %v", got)
	}
}

func TestPebbleApproximateSize(t *testing.T) {
	e := openTestPebble(t, t.TempDir())
	rng := rand.New(rand.NewPCG(1, 1))
	const n, valSize = 4000, 1024
	batch := e.NewBatch()
	for i := range n {
		val := make([]byte, valSize)
		for j := range val {
			val[j] = byte(rng.Uint32()) // incompressible, so sizes track data
		}
		_ = batch.Set(b(fmt.Sprintf("k%05d", i)), val)
	}
	if err := batch.Commit(false); err != nil {
		t.Fatal(err)
	}
	_ = batch.Close()

	// Memtable data is not counted until flushed.
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return b(fmt.Sprintf("k%05d", i)) }
	size := func(lower, upper []byte) uint64 {
		t.Helper()
		s, err := e.ApproximateSize(lower, upper)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	total := size(nil, nil)
	if raw := uint64(n * valSize); total < raw*8/10 || total > raw*2 {
		t.Fatalf("total %d, raw data %d", total, raw)
	}
	if bounded := size(nil, b("l")); bounded != total {
		t.Errorf("[nil, l) = %d, [nil, nil) = %d", bounded, total)
	}
	// Monotone in the upper bound, and roughly proportional.
	prev := uint64(0)
	for i := 0; i <= n; i += n / 8 {
		s := size(key(0), key(i))
		if s < prev {
			t.Errorf("size[k0, k%d) = %d < previous %d", i, s, prev)
		}
		prev = s
	}
	half := size(key(0), key(n/2))
	if half < total/4 || half > total*3/4 {
		t.Errorf("half the keys: %d of %d", half, total)
	}
	lo, hi := size(nil, key(n/2)), size(key(n/2), nil)
	if lo+hi < total*9/10 || lo+hi > total*11/10 {
		t.Errorf("halves %d + %d vs total %d", lo, hi, total)
	}
	if s := size(b("a"), b("b")); s != 0 {
		t.Errorf("span with no data: %d", s)
	}
	if s := size(b("z"), nil); s != 0 {
		t.Errorf("unbounded span past the data: %d", s)
	}

	// Clearing a span and compacting shrinks it.
	enginetest.Apply(t, e, enginetest.DelRange(string(key(0)), string(key(n/2))))
	if err := e.DB().Compact(t.Context(), key(0), key(n), false); err != nil {
		t.Fatal(err)
	}
	if after := size(key(0), key(n/2)); after > half/10 {
		t.Errorf("after DeleteRange+compact: %d (was %d)", after, half)
	}
}

// TestPebbleGetAllocs pins the hot path: the wrapper adds exactly one
// allocation (the returned copy) on top of whatever Pebble's own Get costs.
// (Pebble v2.1.7 itself allocates once per SST probed, appending its
// obsolete-key filter to a nil slice; nothing a caller can avoid.)
func TestPebbleGetAllocs(t *testing.T) {
	e := openTestPebble(t, t.TempDir())
	enginetest.SetAll(t, e, enginetest.KV{K: "k", V: "value"})
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]byte{b("k"), b("missing")} {
		_, _, _ = e.Get(key) // warm the block cache
		raw := testing.AllocsPerRun(1000, func() {
			if _, closer, err := e.DB().Get(key); err == nil {
				_ = closer.Close()
			}
		})
		wrapped := testing.AllocsPerRun(1000, func() {
			if _, _, err := e.Get(key); err != nil {
				t.Fatal(err)
			}
		})
		want := raw
		if string(key) == "k" {
			want++ // the copy handed to the caller
		}
		if wrapped > want {
			t.Errorf("Get(%q): %.1f allocs/op, Pebble alone %.1f; want at most %.1f", key, wrapped, raw, want)
		}
	}
}

func BenchmarkPebbleGet(b *testing.B) {
	const n = 100_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user/%010d", i)
	}
	val := make([]byte, 100)
	for _, where := range []string{"memtable", "sst"} {
		b.Run(where, func(b *testing.B) {
			opts := storage.DefaultPebbleOptions()
			opts.MemTableSizeBytes = 64 << 20 // keep all n keys in one memtable
			e, err := storage.OpenPebbleEngine(b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			batch := e.NewBatch()
			for _, k := range keys {
				_ = batch.Set(k, val)
			}
			if err := batch.Commit(false); err != nil {
				b.Fatal(err)
			}
			_ = batch.Close()
			if where == "sst" {
				if err := e.Flush(); err != nil {
					b.Fatal(err)
				}
				if err := e.DB().Compact(b.Context(), keys[0], keys[n-1], false); err != nil {
					b.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(1, 1))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, ok, err := e.Get(keys[rng.IntN(n)]); !ok || err != nil {
					b.Fatal("Get failed", err)
				}
			}
		})
	}
}

func BenchmarkPebbleCommit(b *testing.B) {
	key := make([]byte, 16)
	val := make([]byte, 100)
	for _, bc := range []struct {
		name     string
		sync     bool
		parallel bool
	}{
		{"sync", true, false},
		{"sync-parallel", true, true}, // concurrent committers share fsyncs
		{"nosync", false, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e, err := storage.OpenPebbleEngine(b.TempDir(), storage.DefaultPebbleOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			commit := func(key []byte, i uint64) {
				binary.BigEndian.PutUint64(key[8:], i)
				batch := e.NewBatch()
				_ = batch.Set(key, val)
				if err := batch.Commit(bc.sync); err != nil {
					b.Fatal(err)
				}
				_ = batch.Close()
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(key) + len(val)))
			if bc.parallel {
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					key := make([]byte, 16)
					i := rand.Uint64()
					for pb.Next() {
						i++
						commit(key, i)
					}
				})
				return
			}
			i := uint64(0)
			for b.Loop() {
				i++
				commit(key, i)
			}
		})
	}
}
