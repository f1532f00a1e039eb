package sim

import (
	"bytes"
	"fmt"
	"github.com/tidekv/tidekv/internal/units"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

// Dist is how a workload's requests spread over the key space.
type Dist int

const (
	// Uniform: every key equally often.
	Uniform Dist = iota
	// Zipf: key i (in key order, or in a seeded random order with
	// Scramble) gets a share proportional to 1/(i+1)^ZipfS.
	Zipf
	// HotSpan: HotKeys consecutive keys from HotStart get HotShare of all
	// requests, evenly; the rest is uniform over the whole key space.
	// HotKeys=1 is a single hot key.
	HotSpan
)

func (d Dist) String() string {
	switch d {
	case Uniform:
		return "uniform"
	case Zipf:
		return "zipf"
	case HotSpan:
		return "hot-span"
	}
	return fmt.Sprintf("dist(%d)", int(d))
}

// MaxKeys bounds the modeled key space (the model keeps three float64 per
// key).
const MaxKeys = 2_000_000

// Workload is the request mix and data growth applied to the key space.
type Workload struct {
	// Keys is the number of modeled keys: key i is "k" followed by i in ten
	// zero-padded digits, so byte order is numeric order.
	Keys int
	// QPS is all requests per second; ReadShare the fraction that reads.
	QPS, ReadShare float64
	// AnyReplicaReads is the fraction of reads any replica may serve
	// (bounded-staleness and ANY reads); they spread evenly over a range's
	// live replicas, adaptive learners included. The rest go to the
	// leaseholder.
	AnyReplicaReads float64
	Dist            Dist
	ZipfS           float64
	Scramble        bool
	HotStart        int
	HotKeys         int
	HotShare        float64
	// GrowthBytesPerSec is how fast data grows, spread over ranges like
	// writes.
	GrowthBytesPerSec float64
	// WriteOrigins is the share of every range's writes that comes from
	// each locality (the rest from clients that name none), as the
	// leaseholders count them for leases to follow their writers.
	WriteOrigins map[string]float64
}

// DefaultWorkload is 1000 uniform requests per second over 100000 keys,
// 90% reads, no growth.
func DefaultWorkload() Workload {
	return Workload{Keys: 100_000, QPS: 1000, ReadShare: 0.9}
}

// Validate reports a setting the model cannot use.
func (w Workload) Validate() error {
	switch {
	case w.Keys < 1 || w.Keys > MaxKeys:
		return fmt.Errorf("sim: keys must be in [1, %d], got %d", MaxKeys, w.Keys)
	case w.QPS < 0 || w.GrowthBytesPerSec < 0:
		return fmt.Errorf("sim: qps and growth must be non-negative")
	case w.ReadShare < 0 || w.ReadShare > 1 || w.AnyReplicaReads < 0 || w.AnyReplicaReads > 1:
		return fmt.Errorf("sim: reads and any-replica-reads must be in [0,1]")
	case w.Dist == Zipf && w.ZipfS <= 0:
		return fmt.Errorf("sim: zipf parameter must be positive, got %v", w.ZipfS)
	case !sharesValid(w.WriteOrigins):
		return fmt.Errorf("sim: write origin shares must be in [0,1] and sum to at most 1, got %v", w.WriteOrigins)
	case w.Dist == HotSpan && (w.HotKeys < 1 || w.HotStart < 0 || w.HotStart+w.HotKeys > w.Keys || w.HotShare < 0 || w.HotShare > 1):
		return fmt.Errorf("sim: hot span [%d,+%d) share %v does not fit %d keys", w.HotStart, w.HotKeys, w.HotShare, w.Keys)
	}
	return nil
}

func (w Workload) String() string {
	s := fmt.Sprintf("%s qps=%.0f keys=%d reads=%.2f", w.Dist, w.QPS, w.Keys, w.ReadShare)
	switch w.Dist {
	case Zipf:
		s += fmt.Sprintf(" s=%.2f", w.ZipfS)
		if w.Scramble {
			s += " scrambled"
		}
	case HotSpan:
		s += fmt.Sprintf(" hot=[%d,+%d) share=%.2f", w.HotStart, w.HotKeys, w.HotShare)
	}
	if w.AnyReplicaReads > 0 {
		s += fmt.Sprintf(" any-replica-reads=%.2f", w.AnyReplicaReads)
	}
	if w.GrowthBytesPerSec > 0 {
		s += " growth=" + units.Compact(uint64(w.GrowthBytesPerSec)) + "/s"
	}
	if len(w.WriteOrigins) > 0 {
		locs := make([]string, 0, len(w.WriteOrigins))
		for l := range w.WriteOrigins {
			locs = append(locs, l)
		}
		sort.Strings(locs)
		for i, l := range locs {
			locs[i] = fmt.Sprintf("%s:%.2f", l, w.WriteOrigins[l])
		}
		s += " writes-from=" + strings.Join(locs, ",")
	}
	return s
}

// keyDist is a workload's distribution over key indices: cumulative shares
// for range sums and a segment tree for the hottest key in an interval.
type keyDist struct {
	n    int
	cum  []float64 // cum[i] = share of keys [0, i)
	size int       // leaves of the tree: a power of two ≥ n
	tree []float64 // tree[size+i] = key i's share; tree[i] = max of children
}

func newKeyDist(w Workload, rng *rand.Rand) *keyDist {
	n := w.Keys
	pmf := make([]float64, n)
	switch w.Dist {
	case Uniform:
		for i := range pmf {
			pmf[i] = 1 / float64(n)
		}
	case Zipf:
		var sum float64
		for i := range pmf {
			pmf[i] = 1 / math.Pow(float64(i+1), w.ZipfS)
			sum += pmf[i]
		}
		for i := range pmf {
			pmf[i] /= sum
		}
		if w.Scramble {
			rng.Shuffle(n, func(i, j int) { pmf[i], pmf[j] = pmf[j], pmf[i] })
		}
	case HotSpan:
		base := (1 - w.HotShare) / float64(n)
		for i := range pmf {
			pmf[i] = base
		}
		for i := w.HotStart; i < w.HotStart+w.HotKeys; i++ {
			pmf[i] += w.HotShare / float64(w.HotKeys)
		}
	}
	d := &keyDist{n: n, cum: make([]float64, n+1)}
	for i, p := range pmf {
		d.cum[i+1] = d.cum[i] + p
	}
	d.size = 1
	for d.size < n {
		d.size *= 2
	}
	d.tree = make([]float64, 2*d.size)
	copy(d.tree[d.size:], pmf)
	for i := d.size - 1; i > 0; i-- {
		d.tree[i] = math.Max(d.tree[2*i], d.tree[2*i+1])
	}
	return d
}

// share of requests to keys [lo, hi).
func (d *keyDist) share(lo, hi int) float64 {
	if hi <= lo {
		return 0
	}
	return math.Max(0, d.cum[hi]-d.cum[lo])
}

// hottest key's share of all requests among keys [lo, hi).
func (d *keyDist) hottest(lo, hi int) float64 {
	if hi <= lo {
		return 0
	}
	var m float64
	for l, r := lo+d.size, hi+d.size; l < r; l, r = l/2, r/2 {
		if l&1 == 1 {
			m = math.Max(m, d.tree[l])
			l++
		}
		if r&1 == 1 {
			r--
			m = math.Max(m, d.tree[r])
		}
	}
	return m
}

// median is the split index s in (lo, hi) such that keys [lo, s) get about
// half of the requests to [lo, hi); ok is false when fewer than two keys
// remain.
func (d *keyDist) median(lo, hi int) (int, bool) {
	if hi-lo < 2 {
		return 0, false
	}
	target := d.cum[lo] + d.share(lo, hi)/2
	s := lo + 1 + sort.Search(hi-lo-1, func(i int) bool { return d.cum[lo+1+i] >= target })
	return min(s, hi-1), true
}

// Keys: key i is "k" + i in ten digits. ceilIndex(k) is the first key index
// whose key is ≥ k, so a range [start, end) holds key indices
// [ceilIndex(start), ceilIndex(end)).

// Key returns the modeled key with index i.
func Key(i int) []byte { return fmt.Appendf(nil, "k%010d", i) }

func ceilIndex(k []byte, n int) int {
	return sort.Search(n, func(i int) bool { return bytes.Compare(Key(i), k) >= 0 })
}

// bounds turns a range's byte bounds into key indices; nil bounds are the
// ends of the key space.
func bounds(start, end []byte, n int) (lo, hi int) {
	lo, hi = 0, n
	if len(start) > 0 {
		lo = ceilIndex(start, n)
	}
	if len(end) > 0 {
		hi = ceilIndex(end, n)
	}
	return lo, max(lo, hi)
}

// sharesValid reports whether shares are each in [0,1] and sum to at most 1.
func sharesValid(shares map[string]float64) bool {
	sum := 0.0
	for _, f := range shares {
		if f < 0 || f > 1 {
			return false
		}
		sum += f
	}
	return sum <= 1+1e-9
}
