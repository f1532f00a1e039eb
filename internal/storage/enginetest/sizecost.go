package enginetest

import (
	"fmt"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

// TallySize checks an engine whose ApproximateSize answers from a
// storage.SizeTally: the whole engine's size is exact and reads no key
// however many the engine holds, through overwrites, deletions and range
// deletions made while a snapshot is open; a span without keys reads 0; a
// span of half the keys reads a bounded number of keys and samples and
// lands near the truth. visits returns the tally's Visits. walks says the
// engine reads any span of at most storage.SizeWalkKeys keys exactly (an
// ordered index); a hashed one estimates every span but the whole.
func TallySize(t *testing.T, k Kind, visits func(storage.Engine) uint64, walks bool) {
	for _, n := range []int{1_000, 32_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := k.Open(t)
			key := func(i int) string { return fmt.Sprintf("k%06d", i) }
			kvs := make([]KV, n)
			for i := range kvs {
				kvs[i] = KV{key(i), "value-of-16-byte"}
			}
			SetAll(t, e, kvs...)
			snap := e.NewSnapshot() // keeps old versions where an engine versions
			defer snap.Close()
			Apply(t, e, Set(key(0), "longer than before"), Set(key(1), "short"), Del(key(2)), Del(key(2)),
				DelRange(key(10), key(20)), Set(key(15), "back"))

			wantSize := func(lower, upper []byte) uint64 {
				var sum uint64
				for _, p := range Scan(t, e, lower, upper) {
					sum += uint64(len(p.K) + len(p.V))
				}
				return sum
			}
			size := func(lower, upper []byte) (uint64, uint64) {
				t.Helper()
				before := visits(e)
				got, err := e.ApproximateSize(lower, upper)
				if err != nil {
					t.Fatal(err)
				}
				return got, visits(e) - before
			}

			if got, read := size(nil, nil); got != wantSize(nil, nil) || read != 0 {
				t.Errorf("whole engine: %d bytes reading %d keys; want %d reading none", got, read, wantSize(nil, nil))
			}
			if got, _ := size([]byte("j"), []byte("k")); got != 0 {
				t.Errorf("a span without keys: %d bytes", got)
			}
			if walks {
				// Up to SizeWalkKeys keys (fewer where the engine holds
				// fewer), read exactly, one by one.
				lo, hi := []byte(key(100)), []byte(key(100+storage.SizeWalkKeys))
				keys := uint64(len(Scan(t, e, lo, hi)))
				if got, read := size(lo, hi); got != wantSize(lo, hi) || read != keys {
					t.Errorf("a span of %d keys: %d bytes reading %d keys; want %d", keys, got, read, wantSize(lo, hi))
				}
			}

			// Half the keys, m of them of one size, each sampled with
			// probability 1/SizeSampleEvery: the sample holds a binomial
			// count of mean m/64 (250 at m=16,000) and standard deviation
			// about its square root (16). 30% off is 4.8 deviations,
			// which happens about once in a million runs.
			lo, hi := []byte(key(n/4)), []byte(key(n/4+n/2))
			want := wantSize(lo, hi)
			got, read := size(lo, hi)
			mean := uint64(n / 2 / storage.SizeSampleEvery)
			if read > storage.SizeWalkKeys+2*mean {
				t.Errorf("half the keys: read %d keys and samples, want at most %d", read, storage.SizeWalkKeys+2*mean)
			}
			if n >= 32_000 && (float64(got) < 0.7*float64(want) || float64(got) > 1.3*float64(want)) {
				t.Errorf("half the keys: %d bytes, want %d within 30%%", got, want)
			}
		})
	}
}
