package plot

import "math"

// A tick step is 1, 2 or 5 × 10^k ("nice numbers"): a reader reads a value
// off the axis by counting round steps, which a step of 4.4 or 8.74k
// defeats.
var niceMantissas = []int64{1, 2, 5}

// step is a nice tick step, kept as mantissa × 10^exp so that tick values
// are computed exactly (3 × 0.2 prints as 0.6, not 0.6000000000000001).
type step struct {
	mant int64
	exp  int
}

func (s step) size() float64 { return float64(s.mant) * math.Pow10(s.exp) }

// at is the k-th multiple of the step.
func (s step) at(k int64) float64 {
	if s.exp < 0 {
		return float64(k*s.mant) / math.Pow10(-s.exp)
	}
	return float64(k*s.mant) * math.Pow10(s.exp)
}

// niceStep picks the nice step of which the number of whole steps that
// fit in span is closest to n; the larger step on a tie. integer keeps the
// step at 1 or more, so an axis of counts never shows a fractional tick.
func niceStep(span float64, n int, integer bool) step {
	if !(span > 0) || math.IsInf(span, 0) {
		span = 1
	}
	e := int(math.Floor(math.Log10(span / float64(n))))
	best, bestDiff := step{1, 0}, math.Inf(1)
	for exp := e - 1; exp <= e+1; exp++ {
		for _, m := range niceMantissas {
			s := step{m, exp}
			if integer && exp < 0 {
				continue
			}
			d := math.Abs(math.Floor(span/s.size()+1e-9) - float64(n))
			if d <= bestDiff {
				best, bestDiff = s, d
			}
		}
	}
	return best
}

// ticksIn lists the multiples of s within [lo, hi].
func ticksIn(lo, hi float64, s step) []float64 {
	var out []float64
	sz := s.size()
	for k := int64(math.Ceil(lo/sz - 1e-9)); ; k++ {
		v := s.at(k)
		if v > hi+sz*1e-9 {
			return out
		}
		out = append(out, v)
	}
}

// yTicksWanted and xTicksWanted are about how many whole steps fit under
// the data's span: a 180-pixel panel reads well with 4–6 ticks (the y axis
// adds 0 and the tick above the maximum), the 660-pixel x axis with 6–10.
const (
	yTicksWanted = 4
	xTicksWanted = 8
)

// yAxis is the panel's scale: 0 up to the first tick above its largest
// value (or reference line), and the ticks on the way. Strictly above
// keeps a line at a round maximum (8 nodes) off the frame; a fixed
// headroom would lift a share that peaks at 0.985 to a top of 1.2.
func (p Panel) yAxis() (top float64, ticks []float64) {
	m := p.HLine
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if finite(pt.Y) {
				m = math.Max(m, pt.Y)
			}
		}
	}
	if m <= 0 {
		m = 1
	}
	s := niceStep(m, yTicksWanted, p.Integer)
	top = s.at(int64(math.Floor(m/s.size()+1e-9)) + 1)
	return top, ticksIn(0, top, s)
}

// xTicks are the numeric x labels: round values within the axis, which
// keeps the data's own ends (a run from 0 to 600 s is not stretched to
// a round 1000).
func xTicks(lo, hi float64) []float64 {
	return ticksIn(lo, hi, niceStep(hi-lo, xTicksWanted, false))
}
