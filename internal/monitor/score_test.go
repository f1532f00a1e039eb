package monitor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestScoreKnownValues(t *testing.T) {
	w := DefaultWeights()
	tests := []struct {
		name string
		u    Usage
		rtt  time.Duration
		want float64
	}{
		{"idle", Usage{}, 0, 4},
		{"cpu half busy", Usage{CPU: 0.5}, 0, 5},
		{"disk 90%", Usage{DiskIO: 0.9}, 0, 1 + 0.5 + 15 + 1},
		{"queue half full", Usage{QueueDepth: 50, QueueLimit: 100}, 0, 5},
		{"unbounded queue", Usage{QueueDepth: 50}, 0, 4},
		{"service and rtt", Usage{ServiceTime: 2500 * time.Microsecond}, 1500 * time.Microsecond, 8},
		{"saturated cpu clamped", Usage{CPU: 1}, 0, 100 + 3},
		{"negative durations ignored", Usage{ServiceTime: -time.Second}, -time.Second, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Score(tc.u, tc.rtt, w); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("Score = %v, want %v", got, tc.want)
			}
		})
	}
}

// randUsage draws utilisations over and beyond [0,1] (including the
// special values Score must tolerate) and durations up to 100 ms.
func randUsage(r *rand.Rand) Usage {
	util := func() float64 {
		switch r.IntN(20) {
		case 0:
			return 1
		case 1:
			return math.NaN()
		case 2:
			return math.Inf(1)
		case 3:
			return -0.5
		}
		return r.Float64() * 1.2
	}
	limit := r.IntN(200)
	return Usage{
		CPU:         util(),
		Memory:      util(),
		DiskIO:      util(),
		QueueDepth:  r.IntN(300),
		QueueLimit:  limit,
		ServiceTime: time.Duration(r.Int64N(int64(100 * time.Millisecond))),
	}
}

func randWeights(r *rand.Rand) Weights {
	f := func() float64 {
		if r.IntN(5) == 0 {
			return 0
		}
		return r.Float64() * 10
	}
	return Weights{CPU: f(), Memory: f(), DiskIO: f(), Queue: f(), ServiceTime: f(), RTT: f() + 0.01}
}

// TestScoreMonotone: raising any one input never lowers the score, with
// arbitrary (valid) weights and arbitrary starting points.
func TestScoreMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bumps := []struct {
		name string
		f    func(*Usage, *time.Duration, float64)
	}{
		{"CPU", func(u *Usage, _ *time.Duration, d float64) { u.CPU = clampUtil(u.CPU) + d }},
		{"Memory", func(u *Usage, _ *time.Duration, d float64) { u.Memory = clampUtil(u.Memory) + d }},
		{"DiskIO", func(u *Usage, _ *time.Duration, d float64) { u.DiskIO = clampUtil(u.DiskIO) + d }},
		{"QueueDepth", func(u *Usage, _ *time.Duration, d float64) { u.QueueDepth += int(d * 100) }},
		{"ServiceTime", func(u *Usage, _ *time.Duration, d float64) { u.ServiceTime += time.Duration(d * 1e7) }},
		{"RTT", func(_ *Usage, rtt *time.Duration, d float64) { *rtt += time.Duration(d * 1e7) }},
	}
	for _, b := range bumps {
		t.Run(b.name, func(t *testing.T) {
			for i := 0; i < 20000; i++ {
				u, w := randUsage(r), randWeights(r)
				rtt := time.Duration(r.Int64N(int64(100 * time.Millisecond)))
				before := Score(u, rtt, w)
				u2, rtt2 := u, rtt
				b.f(&u2, &rtt2, r.Float64())
				if after := Score(u2, rtt2, w); after < before {
					t.Fatalf("raising %s lowered the score: %v -> %v\nusage %+v rtt %v\nto    %+v rtt %v\nweights %+v",
						b.name, before, after, u, rtt, u2, rtt2, w)
				}
			}
		})
	}
}

// TestScoreStrictlyIncreasing: below the clamp, more load is strictly worse
// when the weight is positive.
func TestScoreStrictlyIncreasing(t *testing.T) {
	w := DefaultWeights()
	for _, u := range []float64{0, 0.1, 0.5, 0.9, 0.98} {
		lo, hi := Score(Usage{CPU: u}, 0, w), Score(Usage{CPU: u + 0.005}, 0, w)
		if !(hi > lo) {
			t.Errorf("CPU %v -> %v: score %v -> %v, want increase", u, u+0.005, lo, hi)
		}
	}
	if a, b := Score(Usage{}, time.Millisecond, w), Score(Usage{}, 2*time.Millisecond, w); !(b > a) {
		t.Errorf("rtt 1ms -> 2ms: score %v -> %v, want increase", a, b)
	}
}

func TestScoreFinite(t *testing.T) {
	w := DefaultWeights()
	for _, v := range []float64{1, 1.5, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64} {
		u := Usage{CPU: v, Memory: v, DiskIO: v, QueueDepth: 10, QueueLimit: 10}
		s := Score(u, time.Duration(math.MaxInt64), w)
		if math.IsNaN(s) || math.IsInf(s, 0) {
			t.Errorf("Score with utilisation %v = %v, want finite", v, s)
		}
	}
	// Saturated beyond the limit is no worse than exactly at the clamp.
	at := Score(Usage{CPU: MaxUtilisation}, 0, w)
	if over := Score(Usage{CPU: 1}, 0, w); over != at {
		t.Errorf("Score(cpu=1) = %v, want clamp value %v", over, at)
	}
}

func TestScoreEqualInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1000; i++ {
		u, w := randUsage(r), randWeights(r)
		rtt := time.Duration(r.Int64N(int64(time.Second)))
		u2 := u                               // an equal value built separately
		u2.SampledAt = time.Unix(int64(i), 0) // when it was sampled does not matter
		a, b := Score(u, rtt, w), Score(u2, rtt, w)
		if a != b && !(math.IsNaN(a) && math.IsNaN(b)) {
			t.Fatalf("equal inputs gave %v and %v", a, b)
		}
		// Additive in rtt: local score plus the chooser's rtt term.
		if got, want := Score(u, 0, w)+w.RTT*millis(rtt), Score(u, rtt, w); math.Abs(got-want) > 1e-9*math.Max(1, want) {
			t.Fatalf("not additive in rtt: %v vs %v", got, want)
		}
	}
}

func TestWeightsValidate(t *testing.T) {
	tests := []struct {
		name    string
		w       Weights
		wantErr string // substring; "" means valid
	}{
		{"defaults", DefaultWeights(), ""},
		{"single positive", Weights{RTT: 1}, ""},
		{"all zero", Weights{}, "all weights are zero"},
		{"negative", Weights{CPU: 1, Memory: -0.1}, "Memory is -0.1"},
		{"NaN", Weights{CPU: math.NaN(), Memory: 1}, "CPU is NaN"},
		{"Inf", Weights{CPU: 1, DiskIO: math.Inf(1)}, "DiskIO is +Inf"},
		{"several reported", Weights{Queue: -1, ServiceTime: math.Inf(-1)}, "ServiceTime is -Inf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func BenchmarkScore(b *testing.B) {
	u := Usage{CPU: 0.4, Memory: 0.6, DiskIO: 0.2, QueueDepth: 10, QueueLimit: 100, ServiceTime: time.Millisecond}
	w := DefaultWeights()
	var sink float64
	for b.Loop() {
		sink += Score(u, 300*time.Microsecond, w)
	}
	_ = sink
}
