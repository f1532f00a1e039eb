package sim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// LoadCurve is the offered load, in requests per second, at a time since
// the start of a run.
type LoadCurve func(t time.Duration) float64

// StepCurve offers base until at, then factor × base.
func StepCurve(base float64, at time.Duration, factor float64) LoadCurve {
	return func(t time.Duration) float64 {
		if t < at {
			return base
		}
		return base * factor
	}
}

// SpikeCurve offers low, rises linearly to factor × low within one second
// from at, holds it for hold, and falls back within one second.
func SpikeCurve(low float64, at time.Duration, factor float64, hold time.Duration) LoadCurve {
	high := low * factor
	return func(t time.Duration) float64 {
		switch {
		case t < at:
			return low
		case t < at+time.Second:
			return low + (high-low)*(t-at).Seconds()
		case t < at+time.Second+hold:
			return high
		case t < at+2*time.Second+hold:
			return high - (high-low)*(t-at-time.Second-hold).Seconds()
		}
		return low
	}
}

// DiurnalCurve is a sine around mean with the given amplitude and period,
// starting at its trough, plus seeded noise: every second the load is
// multiplied by a factor drawn uniformly in [1−noise, 1+noise].
func DiurnalCurve(mean, amplitude float64, period time.Duration, noise float64, seed uint64) LoadCurve {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	factors := map[int64]float64{}
	return func(t time.Duration) float64 {
		sec := int64(t / time.Second)
		f, ok := factors[sec]
		if !ok {
			f = 1 + noise*(2*rng.Float64()-1)
			factors[sec] = f
		}
		x := mean - amplitude*math.Cos(2*math.Pi*t.Seconds()/period.Seconds())
		return math.Max(0, x*f)
	}
}

// TracePoint is one sample of a recorded rate trace.
type TracePoint struct {
	At  time.Duration
	Ops float64
}

// ParseTrace reads a rate trace: one "seconds,ops" line per sample (blank
// lines and lines starting with # skipped), times strictly increasing.
func ParseTrace(r io.Reader) ([]TracePoint, error) {
	var out []TracePoint
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Split(text, ",")
		if len(f) != 2 {
			return nil, fmt.Errorf("sim: trace line %d: want \"seconds,ops\", got %q", line, text)
		}
		sec, err1 := strconv.ParseFloat(strings.TrimSpace(f[0]), 64)
		ops, err2 := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
		if err1 != nil || err2 != nil || sec < 0 || ops < 0 || math.IsNaN(sec+ops) || math.IsInf(sec+ops, 0) {
			return nil, fmt.Errorf("sim: trace line %d: seconds and ops must be non-negative numbers, got %q", line, text)
		}
		at := time.Duration(sec * float64(time.Second))
		if len(out) > 0 && at <= out[len(out)-1].At {
			return nil, fmt.Errorf("sim: trace line %d: time %vs does not follow %v", line, sec, out[len(out)-1].At)
		}
		out = append(out, TracePoint{At: at, Ops: ops})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sim: trace has no samples")
	}
	return out, nil
}

// TraceCurve interpolates linearly between a trace's samples and holds
// the first and last values beyond them.
func TraceCurve(points []TracePoint) LoadCurve {
	return func(t time.Duration) float64 {
		i := sort.Search(len(points), func(i int) bool { return points[i].At > t })
		switch {
		case i == 0:
			return points[0].Ops
		case i == len(points):
			return points[len(points)-1].Ops
		}
		a, b := points[i-1], points[i]
		f := float64(t-a.At) / float64(b.At-a.At)
		return a.Ops + f*(b.Ops-a.Ops)
	}
}
