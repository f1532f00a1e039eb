package sim

import (
	"math"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
)

// trueAtSLO is what node n can serve with its p99 at slo: its true
// capacity at the utilisation where its M/M/c tail reaches slo.
func trueAtSLO(n *node, slo time.Duration) float64 {
	lo, hi := 0.0, 0.99
	for range 50 {
		if mid := (lo + hi) / 2; sojournQuantile(n.spec.Workers, n.capacity, mid) <= slo {
			lo = mid
		} else {
			hi = mid
		}
	}
	return n.capacity * lo
}

// The capacity model assumes p99 = idle/(1−u) and starts from a prior;
// the simulator's nodes are M/M/4 queues of drawn, drifting capacities
// read with noise. Started 50% off either way, the model's capacity at
// the SLO for every node comes within 15% of the truth within 20 rounds
// and stays there for 10 minutes of drift (the difference left is the
// curve's shape: the model's utilisation at the SLO, 1 − 2 ms/25 ms =
// 0.92, against the queue's 0.98).
func TestCapacityModelConvergesFromWrongPrior(t *testing.T) {
	const (
		tolerance = 0.15
		within    = 20 // rounds
	)
	for _, prior := range []float64{0.5 * elasticPrior, 1.5 * elasticPrior} {
		p := elastic.DefaultPolicy()
		p.Enabled, p.Controller, p.NodeCapacity = true, elastic.Static, prior
		pol, err := Placement(map[string]string{"rf": "3"})
		if err != nil {
			t.Fatal(err)
		}
		node := elasticNode()
		s, err := New(ClusterSpec{Nodes: 3, Node: node, Ranges: elasticRanges, RF: 3, BytesPerRange: elasticRangeBytes},
			elasticWorkload(), pol, Options{Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.EnableAutoscaler(p, node, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		s.SetLoadCurve(func(time.Duration) float64 { return 16000 })
		worst, first := 0.0, 0.0
		for round := 1; round <= 600; round++ {
			s.RunFor(time.Second)
			est := s.AutoscaleStatus().CapacityOpsPerNode
			off := 0.0
			for _, n := range s.nodes {
				off = math.Max(off, math.Abs(est[n.id]/trueAtSLO(n, p.SLOP99)-1))
			}
			if round == 1 {
				first = off
			}
			if round >= within {
				worst = math.Max(worst, off)
			}
		}
		t.Logf("prior %.0f ops/s: %.0f%% off after one round, at most %.0f%% off from round %d to 600", prior, 100*first, 100*worst, within)
		if worst > tolerance {
			t.Errorf("prior %.0f ops/s: capacity at the SLO %.0f%% off the truth after %d rounds, want ≤ %.0f%%", prior, 100*worst, within, 100*tolerance)
		}
	}
}
