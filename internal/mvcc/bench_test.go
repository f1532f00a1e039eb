package mvcc

import (
	"fmt"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

const (
	benchKeys  = 1000
	benchValue = 1000 // bytes, as BenchmarkLeaseholderGet's
)

// benchKeys are prebuilt, so the benchmarks measure the reads alone.
var benchKeyList = func() [][]byte {
	ks := make([][]byte, benchKeys)
	for i := range ks {
		ks[i] = fmt.Appendf(nil, "\x04user%08d", i) // a user data key's prefix, as on a node
	}
	return ks
}()

func benchKey(i int) []byte { return benchKeyList[i] }

// loadBench fills a Pebble engine with benchKeys keys of versions versions
// each (or plain, unversioned keys when versions is 0) and flushes it, so
// reads come from SSTs through a block cache that holds them all, as on a
// node with a warm cache.
func loadBench(b *testing.B, versions, valueLen int) storage.Engine {
	opts := enginetest.PebbleOptions()
	opts.CacheSizeBytes = 64 << 20
	e, err := storage.OpenPebble(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	val := make([]byte, valueLen)
	for i := range benchKeys {
		batch := e.NewBatch()
		var err error
		if versions == 0 {
			err = batch.Set(benchKey(i), val)
		}
		for v := range versions {
			if err == nil {
				err = Put(batch, benchKey(i), hlc.Timestamp{WallTime: int64(1000 + v)}, val)
			}
		}
		if err == nil {
			err = batch.Commit(false)
		}
		if err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
	enginetest.Pebble.Flush(b, e)
	return e
}

// BenchmarkGet reads the newest version of a key with 1 and 10 versions,
// against today's unversioned engine Get of the same key and value.
func BenchmarkGet(b *testing.B) {
	b.Run("unversioned", func(b *testing.B) {
		e := loadBench(b, 0, benchValue)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok, err := e.Get(benchKey(i % benchKeys)); err != nil || !ok {
				b.Fatal(err, ok)
			}
			i++
		}
	})
	for _, versions := range []int{1, 10} {
		b.Run(fmt.Sprintf("versions=%d", versions), func(b *testing.B) {
			e := loadBench(b, versions, benchValue)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if v, err := Get(e, benchKey(i%benchKeys), hlc.MaxTimestamp); err != nil || !v.Found() {
					b.Fatal(err, v)
				}
				i++
			}
		})
	}
}

// BenchmarkScan reads 1000 keys of 100-byte values at the newest
// timestamp, with 1, 10 and 100 versions a key, against an unversioned
// scan that collects each key and value the same way. A key's
// older versions are passed by one seek: stepping through them instead
// measured the same at 10 versions and 7.6x slower at 100.
func BenchmarkScan(b *testing.B) {
	b.Run("unversioned", func(b *testing.B) {
		e := loadBench(b, 0, 100)
		b.ReportAllocs()
		for b.Loop() {
			it, err := e.NewIter(nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			var kvs []KeyValue
			for ok := it.First(); ok; ok = it.Next() {
				k, v := it.Key(), it.Value()
				buf := append(append(make([]byte, 0, len(k)+len(v)), k...), v...)
				kvs = append(kvs, KeyValue{Key: buf[:len(k)], Value: buf[len(k):]})
			}
			if err := it.Close(); err != nil || len(kvs) != benchKeys {
				b.Fatal(err, len(kvs))
			}
		}
	})
	for _, versions := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("versions=%d", versions), func(b *testing.B) {
			e := loadBench(b, versions, 100)
			b.ReportAllocs()
			for b.Loop() {
				kvs, resume, err := Scan(e, nil, nil, hlc.MaxTimestamp, benchKeys, 1<<30)
				if err != nil || resume != nil || len(kvs) != benchKeys {
					b.Fatal(err, resume, len(kvs))
				}
			}
		})
	}
	// Reading below the newest version makes every key seek.
	b.Run("versions=10/older", func(b *testing.B) {
		e := loadBench(b, 10, 100)
		b.ReportAllocs()
		for b.Loop() {
			kvs, _, err := Scan(e, nil, nil, hlc.Timestamp{WallTime: 1004}, benchKeys, 1<<30)
			if err != nil || len(kvs) != benchKeys {
				b.Fatal(err, len(kvs))
			}
		}
	})
}
