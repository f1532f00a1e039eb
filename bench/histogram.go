package bench

import (
	"math"
	"math/bits"
)

// The latency histogram is log-linear, like HdrHistogram: values below
// 2^(histSubBits+1) have a bucket each, and every higher power-of-two range
// is split into 2^histSubBits equal buckets, so any value is within
// 1/2^histSubBits (0.8%) of its bucket's bounds. Recording is a few integer
// operations and no allocation. Each goroutine owns its histograms and they
// are merged when a phase ends, so recording needs no synchronisation.
const (
	histSubBits = 7
	// histMaxBits bounds recorded values to < 2^40 ns (about 18 minutes);
	// longer latencies are clamped into the last bucket.
	histMaxBits = 40
	histBuckets = (histMaxBits - histSubBits + 1) << histSubBits
	histMax     = 1<<histMaxBits - 1
)

// histogram records non-negative values (latencies in nanoseconds).
type histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      float64 // float so that long runs cannot overflow
	min, max uint64
}

// bucketOf returns the index of v's bucket. With shift = the number of low
// bits dropped (0 for the exact range), the index is shift*2^sub + v>>shift,
// which is contiguous across power-of-two boundaries.
func bucketOf(v uint64) int {
	shift := bits.Len64(v) - histSubBits - 1
	if shift < 0 {
		shift = 0
	}
	return shift<<histSubBits + int(v>>shift)
}

// bucketBounds returns the smallest and largest value of bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	shift := i>>histSubBits - 1
	if shift < 0 {
		shift = 0
	}
	lo = uint64(i-shift<<histSubBits) << shift
	return lo, lo + 1<<shift - 1
}

func (h *histogram) record(v uint64) {
	if v > histMax {
		v = histMax
	}
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += float64(v)
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
}

func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// quantile returns the value at quantile q in [0, 1]: the upper bound of
// the bucket holding the ceil(q*n)-th smallest value (HdrHistogram's
// "highest equivalent value"), clamped to the exact min and max.
func (h *histogram) quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	// The epsilon keeps float error (0.6*5 = 3.0000000000000004) from
	// pushing the rank one past an exact boundary.
	rank := uint64(math.Ceil(q*float64(h.n) - 1e-9))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketBounds(i)
			return min(max(hi, h.min), h.max)
		}
	}
	return h.max
}
