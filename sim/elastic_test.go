package sim

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

// A static two-node cluster under a load that doubles: the recorded p99
// rises past the SLO after the step, and the metrics count exactly those
// seconds.
func TestLoadCurveTimeline(t *testing.T) {
	w := DefaultWorkload()
	w.ReadShare = 1
	cfg := map[string]string{"rebalance": "false", "rf": "1"}
	p, err := Placement(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ClusterSpec{Nodes: 2, Ranges: 8, RF: 1, Node: NodeSpec{Capacity: 10000}}, w, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 2 × 10000 of capacity over 4 workers each: 12000/s is u = 0.6
	// (p99 2 ms), 19800/s is u = 0.99 (p99 46 ms; at 0.95 the M/M/4 tail
	// is still under 10 ms).
	s.SetLoadCurve(StepCurve(12000, 30*time.Second, 19800.0/12000))
	s.RunFor(time.Minute)
	pts := s.ElasticTimeline()
	if len(pts) != 60 {
		t.Fatalf("%d points, want one per 1 s tick", len(pts))
	}
	before, after := pts[20], pts[50]
	if before.Offered != 12000 || after.Offered != 19800 || before.Nodes != 2 {
		t.Fatalf("before %+v after %+v", before, after)
	}
	if before.P99 > 10*time.Millisecond || after.P99 < 25*time.Millisecond {
		t.Fatalf("p99 before %v after %v", before.P99, after.P99)
	}
	m := Metrics(pts, 25*time.Millisecond, time.Second, 0)
	if m.ViolationSeconds != 31 || m.NodeSeconds != 120 {
		t.Fatalf("metrics %s", m)
	}
	var csv strings.Builder
	if err := WriteElasticCSV(&csv, pts); err != nil || strings.Count(csv.String(), "\n") != 61 {
		t.Fatalf("csv: %v, %d lines", err, strings.Count(csv.String(), "\n"))
	}
	var svg strings.Builder
	if err := ElasticChart("step", pts, 25*time.Millisecond).WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal([]byte(svg.String()), new(struct{})); err != nil {
		t.Fatalf("chart: %v", err)
	}
}
