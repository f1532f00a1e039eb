package routed_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
	"github.com/tidekv/tidekv/internal/storage/routed"
)

// What routing costs a node's other data: Pebble alone, Pebble inside a
// routed engine with no part (a node with no memory key space), and with a
// memory part; the keys read and written lie outside the routable span.
func benchEngines(b *testing.B) map[string]storage.Engine {
	out := map[string]storage.Engine{}
	for _, name := range []string{"pebble", "routed-empty", "routed-part"} {
		e, err := storage.OpenPebble(b.TempDir(), enginetest.PebbleOptions())
		if err != nil {
			b.Fatal(err)
		}
		if name != "pebble" {
			r := routed.New(e, span("\xff", "\xff\xff"))
			if name == "routed-part" {
				if err := r.AddPart(mem(b, memengine.BTree), span("\xff", "\xff\xff")); err != nil {
					b.Fatal(err)
				}
			}
			e = r
		}
		b.Cleanup(func() { e.Close() })
		out[name] = e
	}
	return out
}

func BenchmarkCommit(b *testing.B) {
	val := make([]byte, 100)
	for name, e := range benchEngines(b) {
		b.Run(name, func(b *testing.B) {
			key := make([]byte, 16)
			b.ReportAllocs()
			i := uint64(0)
			for b.Loop() {
				i++
				binary.BigEndian.PutUint64(key[8:], i)
				batch := e.NewBatch()
				_ = batch.Set(key, val)
				_ = batch.Set(append(key, 'x'), val)
				if err := batch.Commit(false); err != nil {
					b.Fatal(err)
				}
				_ = batch.Close()
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	const n = 10_000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user/%010d", i)
	}
	for name, e := range benchEngines(b) {
		batch := e.NewBatch()
		for _, k := range keys {
			_ = batch.Set(k, make([]byte, 100))
		}
		if err := batch.Commit(false); err != nil {
			b.Fatal(err)
		}
		_ = batch.Close()
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok, err := e.Get(keys[rng.IntN(n)]); !ok || err != nil {
					b.Fatal("Get failed", err)
				}
			}
		})
	}
}
