package bench

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Generators follow YCSB's com.yahoo.ycsb.generator package. Unlike YCSB's,
// which are shared and synchronized, each goroutine builds its own over its
// own *rand.Rand, so drawing a key takes no lock; the expensive zeta sums
// are computed once per run and passed in.

const (
	// ycsbZipfianConstant is YCSB's default zipfian skew.
	ycsbZipfianConstant = 0.99
	// scrambledItemCount and scrambledZetan are YCSB's
	// ScrambledZipfianGenerator constants: zipfian draws are made over 10^10
	// items, whose zeta(10^10, 0.99) is precomputed because summing it
	// takes minutes.
	scrambledItemCount = 10_000_000_000
	scrambledZetan     = 26.46902820178302

	fnvOffset64 = 0xcbf29ce484222325
	fnvPrime64  = 1099511628211
)

// intGenerator draws key numbers.
type intGenerator interface {
	next() int64
}

// fnvHash64 is YCSB's Utils.fnvhash64: FNV-1a over the eight little-endian
// bytes of v, made non-negative with abs. Matching it byte for byte keeps
// key names identical to YCSB's.
func fnvHash64(v int64) int64 {
	h := uint64(fnvOffset64)
	u := uint64(v)
	for range 8 {
		h ^= u & 0xff
		h *= fnvPrime64
		u >>= 8
	}
	s := int64(h)
	if s < 0 {
		s = -s
		if s < 0 { // math.MinInt64 has no positive counterpart
			s = math.MaxInt64
		}
	}
	return s
}

// zeta returns initial + sum_{i=from+1}^{to} 1/i^theta: the zeta(to, theta)
// sum extended from zeta(from, theta) = initial. Growing it incrementally is
// what lets the latest distribution follow inserts cheaply.
func zeta(from, to int64, theta, initial float64) float64 {
	sum := initial
	for i := from; i < to; i++ {
		sum += 1 / math.Pow(float64(i+1), theta)
	}
	return sum
}

// uniformGen draws uniformly from [lb, lb+n).
type uniformGen struct {
	rng *rand.Rand
	lb  int64
	n   int64
}

func newUniform(rng *rand.Rand, lb, ub int64) *uniformGen {
	return &uniformGen{rng: rng, lb: lb, n: ub - lb + 1}
}

func (g *uniformGen) next() int64 { return g.lb + g.rng.Int64N(g.n) }

// zipfianGen draws from [base, base+items) with P(base+i) ∝ 1/(i+1)^theta,
// using Gray et al.'s constant-time method: after zeta(items) is known, a
// draw is one uniform variate and one Pow.
type zipfianGen struct {
	rng   *rand.Rand
	base  int64
	items int64 // item count zetan and eta are computed for
	theta float64
	alpha float64 // 1/(1-theta)
	zeta2 float64 // zeta(2, theta)
	half  float64 // 0.5^theta: the boundary of the second item
	zetan float64 // zeta(items, theta)
	eta   float64
}

// newZipfian returns a generator over [base, base+items) given
// zetan = zeta(items, theta), which callers compute once and share.
func newZipfian(rng *rand.Rand, base, items int64, theta, zetan float64) *zipfianGen {
	z := &zipfianGen{
		rng:   rng,
		base:  base,
		items: items,
		theta: theta,
		alpha: 1 / (1 - theta),
		zeta2: zeta(0, 2, theta, 0),
		half:  math.Pow(0.5, theta),
		zetan: zetan,
	}
	z.eta = z.computeEta()
	return z
}

func (z *zipfianGen) computeEta() float64 {
	return (1 - math.Pow(2/float64(z.items), 1-z.theta)) / (1 - z.zeta2/z.zetan)
}

func (z *zipfianGen) next() int64 { return z.nextN(z.items) }

// nextN draws over [base, base+items) for a possibly changed item count.
// Growth extends zeta incrementally; YCSB's version keeps eta from the
// original count, which skews the tail, so eta is recomputed here.
func (z *zipfianGen) nextN(items int64) int64 {
	if items != z.items {
		if items > z.items {
			z.zetan = zeta(z.items, items, z.theta, z.zetan)
		} else {
			z.zetan = zeta(0, items, z.theta, 0)
		}
		z.items = items
		z.eta = z.computeEta()
	}
	u := z.rng.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return z.base
	}
	if uz < 1+z.half {
		return z.base + 1
	}
	v := int64(float64(items) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if v >= items { // float rounding as u approaches 1
		v = items - 1
	}
	return z.base + v
}

// scrambledZipfianGen is YCSB's ScrambledZipfianGenerator: a zipfian draw
// hashed into [lb, lb+n), so the popular items are scattered over the key
// space instead of being the lowest key numbers.
type scrambledZipfianGen struct {
	z  *zipfianGen
	lb int64
	n  int64
}

// newScrambledZipfian returns a generator over [lb, ub]. For theta 0.99 it
// draws over YCSB's 10^10 items and ignores zetan; otherwise it draws over
// the ub-lb+1 items themselves and zetan must be zeta(ub-lb+1, theta).
func newScrambledZipfian(rng *rand.Rand, lb, ub int64, theta, zetan float64) *scrambledZipfianGen {
	n := ub - lb + 1
	var z *zipfianGen
	if theta == ycsbZipfianConstant {
		z = newZipfian(rng, 0, scrambledItemCount, theta, scrambledZetan)
	} else {
		z = newZipfian(rng, 0, n, theta, zetan)
	}
	return &scrambledZipfianGen{z: z, lb: lb, n: n}
}

func (g *scrambledZipfianGen) next() int64 { return g.lb + fnvHash64(g.z.next())%g.n }

// skewedLatestGen is YCSB's SkewedLatestGenerator: zipfian over the distance
// back from the newest acknowledged insert, so recent inserts are hottest.
// It only returns numbers basis has acknowledged, and never 0 (as YCSB).
type skewedLatestGen struct {
	basis *ackCounter
	z     *zipfianGen
}

// newSkewedLatest returns a generator over basis; zetan must be
// zeta(basis.last(), theta) for the count at construction.
func newSkewedLatest(rng *rand.Rand, basis *ackCounter, theta, zetan float64) *skewedLatestGen {
	return &skewedLatestGen{basis: basis, z: newZipfian(rng, 0, basis.last(), theta, zetan)}
}

func (g *skewedLatestGen) next() int64 {
	newest := g.basis.last()
	return newest - g.z.nextN(newest)
}

// hotspotGen is YCSB's HotspotIntegerGenerator: the first hotN numbers of
// [lb, ub] get opnFraction of the draws, the rest get the remainder,
// uniformly within each set.
type hotspotGen struct {
	rng         *rand.Rand
	lb          int64
	hotN, coldN int64
	opnFraction float64
}

func newHotspot(rng *rand.Rand, lb, ub int64, dataFraction, opnFraction float64) *hotspotGen {
	n := ub - lb + 1
	hot := int64(float64(n) * dataFraction)
	return &hotspotGen{rng: rng, lb: lb, hotN: hot, coldN: n - hot, opnFraction: opnFraction}
}

func (g *hotspotGen) next() int64 {
	if g.hotN > 0 && (g.coldN == 0 || g.rng.Float64() < g.opnFraction) {
		return g.lb + g.rng.Int64N(g.hotN)
	}
	return g.lb + g.hotN + g.rng.Int64N(g.coldN)
}

// ackCounter is YCSB's AcknowledgedCounterGenerator: it hands out insert
// key numbers in order and publishes, as last, the highest number at or
// below which every handed-out number has been acknowledged. Readers that
// stay at or below last never ask for a key whose insert is in flight.
// Inserts are a small share of operations, so a mutex is cheap enough for
// acknowledgements; next and last are lock-free.
type ackCounter struct {
	counter atomic.Int64 // next number to hand out
	limit   atomic.Int64 // every number <= limit is acknowledged

	mu      sync.Mutex
	pending map[int64]struct{} // acknowledged numbers above limit+1
}

// newAckCounter starts handing out numbers at start, with everything below
// start (the loaded records) already acknowledged.
func newAckCounter(start int64) *ackCounter {
	c := &ackCounter{pending: make(map[int64]struct{})}
	c.counter.Store(start)
	c.limit.Store(start - 1)
	return c
}

// next hands out the next number.
func (c *ackCounter) next() int64 { return c.counter.Add(1) - 1 }

// last returns the highest number below which all are acknowledged.
func (c *ackCounter) last() int64 { return c.limit.Load() }

// acknowledge marks v as done, advancing last over any run of
// acknowledged numbers.
func (c *ackCounter) acknowledge(v int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.limit.Load()
	if v != l+1 {
		c.pending[v] = struct{}{}
		return
	}
	l = v
	for {
		if _, ok := c.pending[l+1]; !ok {
			break
		}
		delete(c.pending, l+1)
		l++
	}
	c.limit.Store(l)
}

// opChooser draws operation kinds in a workload's proportions, as YCSB's
// DiscreteGenerator.
type opChooser struct {
	rng *rand.Rand
	cum [numOpKinds]float64 // cumulative proportions
}

func newOpChooser(rng *rand.Rand, mix [numOpKinds]float64) *opChooser {
	c := &opChooser{rng: rng}
	var sum float64
	for k, p := range mix {
		sum += p
		c.cum[k] = sum
	}
	// Normalise so that rounding in the proportions cannot leave a gap
	// above the last kind.
	for k := range c.cum {
		c.cum[k] /= sum
	}
	return c
}

func (c *opChooser) next() opKind {
	u := c.rng.Float64()
	for k, cum := range c.cum {
		if u < cum {
			return opKind(k)
		}
	}
	// Unreachable unless rounding left the last cumulative below 1: fall
	// back to the last kind with a non-zero share.
	for k := numOpKinds - 1; k > 0; k-- {
		if c.cum[k] > c.cum[k-1] {
			return k
		}
	}
	return 0
}
