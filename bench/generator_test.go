package bench

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func testRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0)) }

func TestFNVHash64MatchesFNV1a(t *testing.T) {
	for _, v := range []int64{0, 1, 2, 255, 256, 1 << 40, math.MaxInt64} {
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
		want := int64(h.Sum64())
		if want < 0 {
			want = -want
		}
		if got := fnvHash64(v); got != want || got < 0 {
			t.Errorf("fnvHash64(%d) = %d, want %d", v, got, want)
		}
	}
}

func TestScrambledZetanConstant(t *testing.T) {
	// Check YCSB's zeta(10^10, 0.99) with Euler–Maclaurin: the exact sum to
	// m, then the integral and end corrections for the tail.
	const theta, m, n = 0.99, 100000.0, 1e10
	sum := zeta(0, int64(m), theta, 0) - math.Pow(m, -theta) // terms 1..m-1
	sum += (math.Pow(n, 1-theta) - math.Pow(m, 1-theta)) / (1 - theta)
	sum += (math.Pow(m, -theta) + math.Pow(n, -theta)) / 2
	sum += theta / 12 * (math.Pow(m, -theta-1) - math.Pow(n, -theta-1))
	if math.Abs(sum-scrambledZetan) > 1e-6 {
		t.Fatalf("zeta(1e10, 0.99) ≈ %.9f, constant is %.9f", sum, scrambledZetan)
	}
}

func TestZipfianFrequencies(t *testing.T) {
	const items, draws, theta = 1000, 1_000_000, 0.99
	zn := zeta(0, items, theta, 0)
	z := newZipfian(testRand(1), 10, items, theta, zn)
	counts := make([]int, items)
	for range draws {
		v := z.next()
		if v < 10 || v >= 10+items {
			t.Fatalf("draw %d outside [10, %d)", v, 10+items)
		}
		counts[v-10]++
	}
	// Gray's method is exact for the two most popular items.
	for i, want := range []float64{1 / zn, 1 / (math.Pow(2, theta) * zn)} {
		got := float64(counts[i]) / draws
		if math.Abs(got-want)/want > 0.02 {
			t.Errorf("item %d frequency %.4f, want %.4f", i, got, want)
		}
	}
	// The tail is approximate; it must still be roughly 1/rank^theta.
	for _, rank := range []int{10, 100} {
		want := 1 / (math.Pow(float64(rank+1), theta) * zn)
		got := float64(counts[rank]) / draws
		if got < want/2 || got > want*2 {
			t.Errorf("item %d frequency %.5f, want about %.5f", rank, got, want)
		}
	}
	if !(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[100]) {
		t.Errorf("frequencies not decreasing: %d %d %d %d", counts[0], counts[1], counts[10], counts[100])
	}
}

func TestZipfianGrowsIncrementally(t *testing.T) {
	const theta = 0.99
	z := newZipfian(testRand(2), 0, 100, theta, zeta(0, 100, theta, 0))
	for range 1000 {
		if v := z.nextN(500); v < 0 || v >= 500 {
			t.Fatalf("draw %d outside [0, 500)", v)
		}
	}
	if want := zeta(0, 500, theta, 0); math.Abs(z.zetan-want) > 1e-9 {
		t.Fatalf("incremental zeta %v, want %v", z.zetan, want)
	}
}

func TestUniformCoverage(t *testing.T) {
	const lb, ub, draws = 5, 104, 200_000
	g := newUniform(testRand(3), lb, ub)
	counts := make(map[int64]int)
	for range draws {
		v := g.next()
		if v < lb || v > ub {
			t.Fatalf("draw %d outside [%d, %d]", v, lb, ub)
		}
		counts[v]++
	}
	want := float64(draws) / (ub - lb + 1)
	for v := int64(lb); v <= ub; v++ {
		if c := float64(counts[v]); math.Abs(c-want)/want > 0.1 {
			t.Errorf("value %d drawn %v times, want about %v", v, c, want)
		}
	}
}

func TestScrambledZipfianSpreadsHotKeys(t *testing.T) {
	const n, draws = 10000, 1_000_000
	g := newScrambledZipfian(testRand(4), 0, n-1, ycsbZipfianConstant, 0)
	counts := make([]int, n)
	for range draws {
		v := g.next()
		if v < 0 || v >= n {
			t.Fatalf("draw %d outside [0, %d)", v, n)
		}
		counts[v]++
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return counts[b] - counts[a] })

	// Still skewed: the hottest key gets about 1/zeta(10^10) of the draws
	// (plus hash collisions), far above the uniform 1/n.
	top := float64(counts[idx[0]]) / draws
	if want := 1 / scrambledZetan; top < want*0.9 || top > want*1.3 {
		t.Errorf("hottest key frequency %.4f, want about %.4f", top, want)
	}
	// But scattered: the 20 hottest keys fall in many of the ten deciles
	// instead of crowding the lowest numbers as plain zipfian would.
	deciles := map[int]bool{}
	for _, v := range idx[:20] {
		deciles[v*10/n] = true
	}
	if len(deciles) < 5 {
		t.Errorf("20 hottest keys %v span only %d deciles", idx[:20], len(deciles))
	}
}

func TestScrambledZipfianOtherTheta(t *testing.T) {
	const n, theta = 1000, 0.5
	g := newScrambledZipfian(testRand(5), 100, 100+n-1, theta, zeta(0, n, theta, 0))
	for range 10000 {
		if v := g.next(); v < 100 || v >= 100+n {
			t.Fatalf("draw %d outside [100, %d)", v, 100+n)
		}
	}
}

func TestSkewedLatestFollowsInserts(t *testing.T) {
	const records, theta = 1000, 0.99
	c := newAckCounter(records)
	g := newSkewedLatest(testRand(6), c, theta, zeta(0, c.last(), theta, 0))
	newest := 0
	for range 100000 {
		v := g.next()
		if v < 1 || v > records-1 {
			t.Fatalf("draw %d outside [1, %d]", v, records-1)
		}
		if v == records-1 {
			newest++
		}
	}
	if f := float64(newest) / 100000; f < 0.1 {
		t.Errorf("newest record drawn %.3f of the time; latest should favour it", f)
	}
	// After inserts are acknowledged the newest key becomes reachable.
	for range 10 {
		c.acknowledge(c.next())
	}
	sawNew := false
	for range 10000 {
		v := g.next()
		if v > records+9 {
			t.Fatalf("draw %d beyond acknowledged %d", v, records+9)
		}
		sawNew = sawNew || v >= records
	}
	if !sawNew {
		t.Error("never drew an inserted record")
	}
}

func TestHotspot(t *testing.T) {
	const n, draws = 1000, 200000
	g := newHotspot(testRand(7), 0, n-1, 0.2, 0.8)
	hot := 0
	for range draws {
		v := g.next()
		if v < 0 || v >= n {
			t.Fatalf("draw %d outside [0, %d)", v, n)
		}
		if v < 200 {
			hot++
		}
	}
	if f := float64(hot) / draws; math.Abs(f-0.8) > 0.01 {
		t.Errorf("hot set drew %.3f of operations, want 0.8", f)
	}
	// Degenerate fractions must not divide by zero.
	for _, frac := range []float64{0, 1} {
		g := newHotspot(testRand(8), 0, 9, frac, 0.5)
		for range 100 {
			if v := g.next(); v < 0 || v > 9 {
				t.Fatalf("data fraction %v: draw %d outside [0, 9]", frac, v)
			}
		}
	}
}

func TestGeneratorsDeterministic(t *testing.T) {
	mk := func(seed uint64) []intGenerator {
		r := testRand(seed)
		c := newAckCounter(1000)
		return []intGenerator{
			newUniform(r, 0, 999),
			newZipfian(r, 0, 1000, 0.99, zeta(0, 1000, 0.99, 0)),
			newScrambledZipfian(r, 0, 999, 0.99, 0),
			newSkewedLatest(r, c, 0.99, zeta(0, c.last(), 0.99, 0)),
			newHotspot(r, 0, 999, 0.2, 0.8),
		}
	}
	draw := func(gs []intGenerator) []int64 {
		var out []int64
		for range 200 {
			for _, g := range gs {
				out = append(out, g.next())
			}
		}
		return out
	}
	a, b, c := draw(mk(42)), draw(mk(42)), draw(mk(43))
	if !slices.Equal(a, b) {
		t.Error("same seed gave different sequences")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds gave the same sequence")
	}
}

func TestAckCounter(t *testing.T) {
	c := newAckCounter(10)
	if c.last() != 9 {
		t.Fatalf("last = %d, want 9", c.last())
	}
	a, b, d := c.next(), c.next(), c.next() // 10, 11, 12
	c.acknowledge(b)
	c.acknowledge(d)
	if c.last() != 9 {
		t.Fatalf("last = %d before 10 is acknowledged, want 9", c.last())
	}
	c.acknowledge(a)
	if c.last() != 12 {
		t.Fatalf("last = %d, want 12", c.last())
	}

	// Concurrent out-of-order acknowledgements end fully acknowledged.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.acknowledge(c.next())
			}
		})
	}
	wg.Wait()
	if c.last() != 12+8000 || len(c.pending) != 0 {
		t.Fatalf("last = %d with %d pending, want %d with 0", c.last(), len(c.pending), 12+8000)
	}
}

func TestOpChooserProportions(t *testing.T) {
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		wl, _ := lookupWorkload(name)
		var sum float64
		for _, p := range wl.mix {
			sum += p
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("workload %s proportions sum to %v", name, sum)
		}
		c := newOpChooser(testRand(9), wl.mix)
		const draws = 200000
		var counts [numOpKinds]int
		for range draws {
			counts[c.next()]++
		}
		for k, p := range wl.mix {
			got := float64(counts[k]) / draws
			if math.Abs(got-p) > 0.005 {
				t.Errorf("workload %s: %v drawn %.4f, want %.2f", name, opKind(k), got, p)
			}
		}
	}
}
