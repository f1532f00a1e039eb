package scenario

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/plot"
)

func points(s plot.Series) [][2]float64 {
	var out [][2]float64
	for _, p := range s.Points {
		out = append(out, [2]float64{p.X, p.Y})
	}
	return out
}

func samePoints(t *testing.T, what string, s plot.Series, want [][2]float64) {
	t.Helper()
	got := points(s)
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range got {
		for k := range 2 {
			if !(math.Abs(got[i][k]-want[i][k]) < 1e-9 || math.IsNaN(got[i][k]) && math.IsNaN(want[i][k])) {
				t.Fatalf("%s: %v, want %v", what, got, want)
			}
		}
	}
}

func TestFullnessBins(t *testing.T) {
	got := fullnessBins([]float64{0.55, 0.58, 0.91, 1.23})
	// Bins 0-10% ... 120-130%: the empty ones are there (drawn as nothing).
	if len(got) != 13 || got[5].X != 55 || got[5].Y != 2 || got[9].Y != 1 || got[12].X != 125 || got[12].Y != 1 || got[0].Y != 0 {
		t.Errorf("bins %v", got)
	}
	c := partitioningChart([]partitioningResult{{maxBytes: 4 << 20, exact: []float64{0.55}, reported: []float64{0.45}}})
	if len(c.Panels) != 1 || !c.Panels[0].Series[0].Bars || c.Marks[0].X != 100 || !strings.Contains(c.Panels[0].YLabel, "4.0 MiB") {
		t.Errorf("partitioning chart %+v", c)
	}
	// Ticks every 20% reach Θmax even when every range is below it.
	if n := len(c.XTicks); n != 6 || c.XTicks[5].Label != "100%" {
		t.Errorf("ticks %+v", c.XTicks)
	}
}

func TestScaleoutChart(t *testing.T) {
	st := scaleoutStep{nodes: 3, nodeID: 3, firstLease: 4 * time.Second, phase1: true, phase1End: 9 * time.Second, live: 12 * time.Second, samples: []scaleoutSample{
		{at: 1, qps: map[uint64]float64{1: 100, 2: 90}, replicas: map[uint64]float64{1: 10, 2: 10}, leases: map[uint64]float64{1: 6, 2: 4}},
		{at: 5, qps: map[uint64]float64{1: 60, 2: 70, 3: 60}, replicas: map[uint64]float64{1: 10, 2: 10, 3: 4}, leases: map[uint64]float64{1: 4, 2: 3, 3: 3}},
	}}
	c := scaleoutChart(st)
	if len(c.Panels) != 3 || len(c.Panels[0].Series) != 3 {
		t.Fatalf("want 3 panels of 3 nodes, got %+v", c.Panels)
	}
	// The new node counts 0 before it appears.
	samePoints(t, "node 3 replicas", c.Panels[1].Series[2], [][2]float64{{1, 0}, {5, 4}})
	samePoints(t, "node 1 qps", c.Panels[0].Series[0], [][2]float64{{1, 100}, {5, 60}})
	if len(c.Marks) != 3 || c.Marks[0].X != 4 || c.Marks[0].Label != "serving" || c.Marks[1].X != 9 || c.Marks[2].Label != "live" {
		t.Errorf("marks %+v", c.Marks)
	}
	if c := scaleoutChart(scaleoutStep{nodes: 2, firstLease: -1, live: -1}); len(c.Marks) != 0 {
		t.Errorf("a node that never served is marked: %+v", c.Marks)
	}
}

func TestEcstoreChart(t *testing.T) {
	lat := []time.Duration{time.Millisecond, 2 * time.Millisecond}
	c := ecstoreChart([]ecsStep{
		{proto: "grpc", workload: "reads", mode: "admission", multiple: 1, offered: 1000, rejected: 100, dropped: 50, timeouts: 50, svc: lat},
		{proto: "grpc", workload: "reads", mode: "admission", multiple: 3, offered: 0},
		{proto: "resp", workload: "reads", mode: "admission", multiple: 1, offered: 10, rejected: 10},
		{proto: "grpc", workload: "writes", mode: "count-only", multiple: 0.5, offered: 400, other: 4, svc: lat},
	}, "grpc")
	if len(c.Panels[0].Series) != 2 || c.Panels[0].Series[1].Name != "writes (count-only)" {
		t.Fatalf("series %+v", c.Panels[0].Series)
	}
	samePoints(t, "reads failed", c.Panels[0].Series[0], [][2]float64{{1, 20}, {3, math.NaN()}})
	samePoints(t, "writes failed", c.Panels[0].Series[1], [][2]float64{{0.5, 1}})
	if got := c.Panels[1].Series[1].Points[0].Y; got != ms(lrQuantile(lat, 0.99)) {
		t.Errorf("writes p99 %v", got)
	}
}

func TestMeteorAndAdaptiveCharts(t *testing.T) {
	res := lrResult{Lat: []time.Duration{time.Millisecond, 3 * time.Millisecond}}
	c := meteorChart([]meteorRow{{rtt: 0, mode: "lin", res: res}, {rtt: 0, mode: "any", res: res}, {rtt: 100 * time.Millisecond, mode: "lin", res: res}})
	if len(c.Panels[0].Series) != 2 || c.Panels[0].Series[0].Name != "lin" {
		t.Fatalf("series %+v", c.Panels[0].Series)
	}
	samePoints(t, "lin p50", c.Panels[0].Series[0], [][2]float64{{0, ms(res.Q(0.5))}, {100, ms(res.Q(0.5))}})

	cfgs := []adaptiveConfig{{name: "RF1"}, {name: "RF3"}}
	a := adaptiveChart(cfgs, map[string][]adaptiveStep{
		"RF1": {{rate: 1000, sent: 1000, overloaded: 30, dropped: 20, p99: 5 * time.Millisecond}},
		"RF3": {{rate: 1000, sent: 1000}, {rate: 6000, sent: 6000, timeouts: 60, p99: time.Second}},
	})
	samePoints(t, "RF1 failed", a.Panels[0].Series[0], [][2]float64{{1000, 5}})
	samePoints(t, "RF3 p99", a.Panels[1].Series[1], [][2]float64{{1000, 0}, {6000, 1000}})
}

func TestHoroscopeChart(t *testing.T) {
	r := lrResult{Ops: 99, Errors: 1, Elapsed: time.Second, Lat: []time.Duration{2 * time.Millisecond}}
	var rows []hsRow
	for _, stressed := range []bool{false, true} {
		for _, w := range []string{"get", "scan"} {
			for _, m := range []string{"load-aware", "leaseholder"} {
				rows = append(rows, hsRow{stressed: stressed, workload: w, mode: m, res: r})
			}
		}
	}
	c := horoscopeChart(rows)
	if len(c.XTicks) != 4 || c.XTicks[2].Label != "hogs, get" || len(c.Panels[0].Series) != 2 {
		t.Fatalf("ticks %+v, series %d", c.XTicks, len(c.Panels[0].Series))
	}
	samePoints(t, "leaseholder errors", c.Panels[2].Series[1], [][2]float64{{0, 1}, {1, 1}, {2, 1}, {3, 1}})
	samePoints(t, "throughput", c.Panels[1].Series[0], [][2]float64{{0, 99}, {1, 99}, {2, 99}, {3, 99}})
	samePoints(t, "load-aware p99", c.Panels[0].Series[0], [][2]float64{{0, 2}, {1, 2}, {2, 2}, {3, 2}})
}

func TestWriteFigure(t *testing.T) {
	dir := t.TempDir()
	var report strings.Builder
	c := plot.Chart{Title: "t", Panels: []plot.Panel{{Series: []plot.Series{{Name: "a", Points: []plot.Point{{X: 0, Y: 1}, {X: 1, Y: 2}}}}}}}
	if err := writeFigure(Options{Out: filepath.Join(dir, "figs")}, &report, "ecstore", "admission", c); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "figs", "ecstore-admission.svg")
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(b), "<svg") {
		t.Fatalf("figure not written: %v", err)
	}
	if !strings.Contains(report.String(), "("+path+")") {
		t.Errorf("report does not link the figure: %q", report.String())
	}
	report.Reset()
	if err := writeFigure(Options{}, &report, "ecstore", "admission", c); err != nil || report.Len() != 0 {
		t.Errorf("no --out: wrote %q, %v", report.String(), err)
	}
}
