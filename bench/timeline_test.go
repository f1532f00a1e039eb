package bench

import (
	"context"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTimelineCountsPerSecond(t *testing.T) {
	begin := time.Unix(1000, 0)
	tl := &timeline{begin: begin}
	a, b := &worker{tl: tl}, &worker{tl: tl}
	at := func(s float64) time.Time { return begin.Add(time.Duration(s * float64(time.Second))) }
	// Second 1: 99 fast reads and one slow one, plus a failure; second 2:
	// nothing; second 3 (half long): 2 operations.
	for i := range 99 {
		tl.add([]*worker{a, b}[i%2], at(0.5), time.Millisecond, false)
	}
	tl.add(a, at(0.9), 100*time.Millisecond, false)
	tl.add(b, at(0.9), time.Second, true)
	tl.add(a, at(2.1), 2*time.Millisecond, false)
	tl.add(b, at(2.4), 2*time.Millisecond, false)
	tl.flush(a)
	tl.flush(b)
	pts := tl.points(2500 * time.Millisecond)
	if len(pts) != 3 {
		t.Fatalf("%d points, want 3: %+v", len(pts), pts)
	}
	if p := pts[0]; p.Second != 1 || p.Ops != 101 || p.Errors != 1 || p.OpsPerSec != 101 {
		t.Errorf("second 1: %+v", p)
	}
	// p99 of 100 successes is the 99th smallest: a 1 ms read, within the
	// histogram's 6%.
	if p := pts[0].P99Ms; p < 1 || p > 1.07 {
		t.Errorf("second 1 p99 %.3f ms, want 1 ms", p)
	}
	if p := pts[1]; p.Ops != 0 || p.OpsPerSec != 0 || p.P99Ms != 0 {
		t.Errorf("idle second: %+v", p)
	}
	// The last half second's rate is over its length.
	if p := pts[2]; p.Ops != 2 || math.Abs(p.OpsPerSec-4) > 1e-9 || p.P99Ms < 2 || p.P99Ms > 2.14 {
		t.Errorf("second 3: %+v", p)
	}
}

func TestRunRecordsTimeline(t *testing.T) {
	cfg := testConfig("a")
	res, err := Run(context.Background(), cfg, newMemStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*PhaseResult{res.Load, res.Run} {
		var ops int64
		for _, pt := range p.Timeline {
			ops += pt.Ops
		}
		if len(p.Timeline) == 0 || ops != p.Operations {
			t.Errorf("%s: timeline counts %d operations over %d seconds, phase %d", p.Phase, ops, len(p.Timeline), p.Operations)
		}
	}
}

func TestWriteFigures(t *testing.T) {
	res := &Result{Config: Config{Workload: "c", RecordCount: 10, Threads: 2, LoadThreads: 2, Distribution: Zipfian},
		Load: &PhaseResult{Phase: "load", Timeline: []TimelinePoint{{Second: 1, Ops: 10, OpsPerSec: 10, P99Ms: 1}}},
		Run: &PhaseResult{Phase: "run", Timeline: []TimelinePoint{
			{Second: 1, Ops: 100, OpsPerSec: 100, P99Ms: 2},
			{Second: 2, Ops: 4, Errors: 4, OpsPerSec: 4},
			{Second: 3, Ops: 50, Errors: 5, OpsPerSec: 50, P99Ms: 3},
		}}}
	c := res.Run.Chart("run")
	got := func(i, j int) []float64 {
		var ys []float64
		for _, p := range c.Panels[i].Series[j].Points {
			ys = append(ys, p.Y)
		}
		return ys
	}
	// Errors per second, and no p99 for the second without a success.
	if e := got(0, 1); e[1] != 4 || e[2] != 5 {
		t.Errorf("errors/s %v", e)
	}
	if p := got(1, 0); len(p) != 2 || p[0] != 2 || p[1] != 3 {
		t.Errorf("p99 %v, want [2 3]", p)
	}

	dir := filepath.Join(t.TempDir(), "out")
	paths, err := res.WriteFigures(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "ycsb-c-load.svg"), filepath.Join(dir, "ycsb-c-run.svg")}
	if strings.Join(paths, ",") != strings.Join(want, ",") {
		t.Fatalf("paths %v, want %v", paths, want)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(b, new(struct{})); err != nil {
			t.Errorf("%s is not valid SVG: %v", p, err)
		}
	}
}
