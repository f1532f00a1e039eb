package sim

import (
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
)

// lightScaleOut runs 3 nodes under a steady light load, raises the
// minimum to 4 nodes at 2 minutes and returns the timeline.
func lightScaleOut(t *testing.T, qps float64, bw elastic.BandwidthConfig) []ElasticPoint {
	t.Helper()
	p := elastic.DefaultPolicy()
	p.Enabled, p.Actuator, p.NodeCapacity, p.Bandwidth = true, "manual", 10000, bw
	pol, err := Placement(map[string]string{"rf": "3"})
	if err != nil {
		t.Fatal(err)
	}
	node := NodeSpec{Capacity: 10000, DiskBandwidth: 512 << 20, MigrationCost: elasticMigCost}
	s, err := New(ClusterSpec{Nodes: 3, Node: node, Ranges: elasticRanges, RF: 3, BytesPerRange: elasticRangeBytes}, elasticWorkload(), pol, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnableAutoscaler(p, node, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	s.SetLoadCurve(func(time.Duration) float64 { return qps })
	s.RunFor(2 * time.Minute)
	p.MinNodes = 4
	s.loop.Autoscaler.SetPolicy(p)
	s.RunFor(5 * time.Minute)
	return s.ElasticTimeline()
}

// moveStats is the steady p99 before the move, and the mean and worst
// per-second p99 and the mean cluster-wide migration rate while data
// moved, with how long it moved.
func moveStats(pts []ElasticPoint) (steady, mean, worst time.Duration, rate float64, secs int) {
	steady = pts[100].P99
	var sum float64
	for _, p := range pts[120:] {
		if p.MigrationRate > 0 {
			secs++
			sum += float64(p.P99)
			worst = max(worst, p.P99)
			rate += p.MigrationRate
		}
	}
	if secs > 0 {
		mean, rate = time.Duration(sum/float64(secs)), rate/float64(secs)
	}
	return steady, mean, worst, rate, secs
}

// With the foreground light, a scale-out's data moves faster than a fixed
// 32 MiB/s cap would let it, while the bandwidth controller holds the
// foreground p99 near its steady value (the move's mean within 10%; the
// worst second, before the first cut, is logged: see docs/benchmarks/elasticity.md).
func TestElasticBandwidthLightForeground(t *testing.T) {
	for _, qps := range []float64{1000, 3000, 6000} {
		steady, mean, worst, rate, secs := moveStats(lightScaleOut(t, qps, elastic.DefaultBandwidthConfig()))
		fixed := elastic.DefaultBandwidthConfig()
		fixed.Min, fixed.Urgent, fixed.Max = 32<<20, 32<<20, 32<<20
		_, _, _, fixedRate, fixedSecs := moveStats(lightScaleOut(t, qps, fixed))
		t.Logf("%5.0f ops/s: steady p99 %v, during the move mean %v (+%.1f%%) worst %v (+%.0f%%), %.0f MiB/s for %d s; fixed 32 MiB/s cap: %.0f MiB/s for %d s",
			qps, steady, mean, 100*(float64(mean)/float64(steady)-1), worst, 100*(float64(worst)/float64(steady)-1),
			rate/(1<<20), secs, fixedRate/(1<<20), fixedSecs)
		if secs == 0 || rate <= 32<<20 || secs >= fixedSecs {
			t.Errorf("%.0f ops/s: the move ran at %.0f MiB/s for %d s, the fixed cap's for %d s", qps, rate/(1<<20), secs, fixedSecs)
		}
		if float64(mean) > 1.1*float64(steady) {
			t.Errorf("%.0f ops/s: mean p99 during the move %v, more than 10%% over the steady %v", qps, mean, steady)
		}
	}
}
