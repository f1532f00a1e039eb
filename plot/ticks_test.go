package plot

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The y axes that motivated round ticks: a node count of 8 drew ticks at
// 4.4 and 8.8, a rate of 39.7k at 21.8k and 43.7k.
func TestYTicks(t *testing.T) {
	for _, c := range []struct {
		name    string
		max     float64
		hline   float64
		integer bool
		want    []float64
	}{
		{"8 nodes", 8, 0, true, []float64{0, 2, 4, 6, 8, 10}},
		{"22 nodes", 22, 0, true, []float64{0, 5, 10, 15, 20, 25}},
		{"3 nodes", 3, 0, true, []float64{0, 1, 2, 3, 4}},
		{"1 node", 1, 0, true, []float64{0, 1, 2}},
		{"39.7k requests/s", 39700, 0, false, []float64{0, 10000, 20000, 30000, 40000}},
		{"a round maximum stays off the frame", 30000, 0, false, []float64{0, 10000, 20000, 30000, 40000}},
		{"a share that peaks at 0.985", 0.985, 0, false, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{"miss rate 0.98", 0.98, 0, false, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{"p99 54.6 ms over a 25 ms SLO", 54.6, 25, false, []float64{0, 10, 20, 30, 40, 50, 60}},
		{"SLO above the data", 3, 25, false, []float64{0, 5, 10, 15, 20, 25, 30}},
		{"3 µs in ms", 0.003, 0, false, []float64{0, 0.001, 0.002, 0.003, 0.004}},
		{"no data", 0, 0, false, []float64{0, 0.2, 0.4, 0.6, 0.8, 1, 1.2}},
	} {
		p := Panel{HLine: c.hline, Integer: c.integer, Series: []Series{{Points: []Point{{0, c.max / 2}, {1, c.max}}}}}
		top, ticks := p.yAxis()
		if !slices.Equal(ticks, c.want) || top != c.want[len(c.want)-1] {
			t.Errorf("%s: top %v ticks %v, want %v", c.name, top, ticks, c.want)
		}
	}
}

func TestXTicksRound(t *testing.T) {
	for _, c := range []struct {
		name   string
		lo, hi float64
		want   []float64
	}{
		{"10-minute run", 0, 600, []float64{0, 100, 200, 300, 400, 500, 600}},
		{"40-minute run", 0, 2400, []float64{0, 500, 1000, 1500, 2000}},
		{"buckets of 50 steps", 50, 1000, []float64{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000}},
		{"bars at 10..30", 5, 35, []float64{5, 10, 15, 20, 25, 30, 35}},
		{"unit axis", 0, 1, []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}},
		{"RTT 25..200 ms", 25, 200, []float64{40, 60, 80, 100, 120, 140, 160, 180, 200}},
	} {
		if got := xTicks(c.lo, c.hi); !slices.Equal(got, c.want) {
			t.Errorf("%s: ticks %v, want %v", c.name, got, c.want)
		}
	}
}

// Whatever the data, a y axis ticks at multiples of 1, 2 or 5 × 10^k,
// ends above the largest value, keeps to a readable number of ticks, and an
// integer axis ticks on whole numbers only.
func TestYTicksProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		m := math.Pow(10, r.Float64()*12-4) * (1 + r.Float64())
		integer := r.IntN(2) == 0
		if integer {
			m = math.Ceil(m)
		}
		p := Panel{Integer: integer, Series: []Series{{Points: []Point{{0, m}}}}}
		top, ticks := p.yAxis()
		if top <= m || ticks[0] != 0 || ticks[len(ticks)-1] != top {
			t.Fatalf("max %v: top %v ticks %v", m, top, ticks)
		}
		if n := len(ticks); n < 3 || n > 8 {
			t.Fatalf("max %v (integer %v): %d ticks %v", m, integer, n, ticks)
		}
		s := ticks[1] - ticks[0]
		mant := s / math.Pow10(int(math.Floor(math.Log10(s)+1e-9)))
		if !slices.ContainsFunc([]float64{1, 2, 5}, func(w float64) bool { return math.Abs(mant-w) < 1e-6 }) {
			t.Fatalf("max %v: step %v is not 1, 2 or 5 × 10^k", m, s)
		}
		for _, v := range ticks {
			if integer && v != math.Trunc(v) {
				t.Fatalf("integer axis, max %v: fractional tick %v", m, v)
			}
		}
	}
}
