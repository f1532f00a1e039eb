package sim

import (
	"math"
	"testing"
	"time"
)

// The M/M/c quantile against closed forms: one worker is M/M/1, whose
// sojourn is exponential at μ−λ; an idle queue's is the service time's.
func TestSojournQuantile(t *testing.T) {
	within := func(got time.Duration, want float64) bool {
		return math.Abs(got.Seconds()-want) <= 1e-6*want
	}
	for _, u := range []float64{0, 0.3, 0.9, 0.99} {
		if got, want := sojournQuantile(1, 10000, u), math.Log(100)/(10000*(1-u)); !within(got, want) {
			t.Errorf("M/M/1 at u=%v: %v, want %vs", u, got, want)
		}
	}
	if got, want := sojournQuantile(4, 10000, 0), math.Log(100)/2500; !within(got, want) {
		t.Errorf("idle M/M/4: %v, want %vs", got, want)
	}
	for _, u := range []float64{0, 0.5, 0.8, 0.9, 0.92, 0.95, 0.97, 0.98, 0.99} {
		t.Logf("u=%.2f M/M/4 p99 %v, 2ms/(1-u) %v", u, sojournQuantile(4, 10000, u), time.Duration(float64(2*time.Millisecond)/(1-u)))
	}
}
