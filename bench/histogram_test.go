package bench

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBucketBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	check := func(v uint64) {
		i := bucketOf(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d outside [0, %d)", v, i, histBuckets)
		}
		lo, hi := bucketBounds(i)
		if v < lo || v > hi {
			t.Fatalf("%d not in its bucket %d [%d, %d]", v, i, lo, hi)
		}
		if v >= 1<<(histSubBits+1) && float64(hi-lo+1)/float64(lo) > 1.0/(1<<histSubBits) {
			t.Fatalf("bucket %d [%d, %d] wider than 1/%d of its values", i, lo, hi, 1<<histSubBits)
		}
	}
	for v := uint64(0); v < 5000; v++ {
		check(v)
	}
	for range 100000 {
		check(r.Uint64N(histMax + 1))
	}
	check(histMax)
	// Buckets are contiguous: each starts right after the previous one.
	for i := 1; i < histBuckets; i++ {
		_, prevHi := bucketBounds(i - 1)
		if lo, _ := bucketBounds(i); lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ends at %d", i, lo, prevHi)
		}
	}
}

func TestHistogramPercentiles(t *testing.T) {
	var h histogram
	// 1..100000 µs in ns, recorded out of order.
	const n = 100000
	for i := range n {
		v := uint64((i*7919)%n+1) * 1000
		h.record(v)
	}
	if h.n != n || h.min != 1000 || h.max != n*1000 {
		t.Fatalf("n=%d min=%d max=%d", h.n, h.min, h.max)
	}
	if got, want := h.mean(), float64(n+1)/2*1000; math.Abs(got-want) > 1e-6*want {
		t.Errorf("mean %v, want %v", got, want)
	}
	for _, c := range []struct{ q, want float64 }{
		{0.5, 50000e3}, {0.95, 95000e3}, {0.99, 99000e3}, {0.999, 99900e3}, {1, 100000e3},
	} {
		got := float64(h.quantile(c.q))
		// Bucket upper bounds overestimate by at most 1/128.
		if got < c.want || got > c.want*(1+1.0/(1<<histSubBits)) {
			t.Errorf("quantile(%v) = %v, want %v (+0.8%%)", c.q, got, c.want)
		}
	}
	if h.quantile(0) != 1000 {
		t.Errorf("quantile(0) = %d, want the minimum", h.quantile(0))
	}
}

func TestHistogramExactSmallValues(t *testing.T) {
	var h histogram
	for _, v := range []uint64{3, 1, 2, 2, 5} {
		h.record(v)
	}
	for _, c := range []struct {
		q    float64
		want uint64
	}{{0.2, 1}, {0.4, 2}, {0.6, 2}, {0.8, 3}, {1, 5}} {
		if got := h.quantile(c.q); got != c.want {
			t.Errorf("quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
}

func TestHistogramMergeAndEmpty(t *testing.T) {
	var empty histogram
	if empty.quantile(0.5) != 0 || empty.mean() != 0 {
		t.Fatal("empty histogram should report zeros")
	}
	var a, b histogram
	for v := uint64(1); v <= 50; v++ {
		a.record(v)
		b.record(v + 50)
	}
	a.merge(&b)
	a.merge(&empty)
	if a.n != 100 || a.min != 1 || a.max != 100 || a.quantile(0.5) != 50 {
		t.Fatalf("merged n=%d min=%d max=%d p50=%d", a.n, a.min, a.max, a.quantile(0.5))
	}
	// Values beyond the tracked range are clamped, not lost.
	a.record(math.MaxUint64)
	if a.max != histMax || a.n != 101 {
		t.Fatalf("clamped max=%d n=%d", a.max, a.n)
	}
}
