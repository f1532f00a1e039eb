package plot

import (
	"encoding/xml"
	"strings"
	"testing"
)

func TestWriteSVG(t *testing.T) {
	c := Chart{Title: "step <2x>", XLabel: "seconds", Panels: []Panel{
		{YLabel: "ops/s", Series: []Series{{Name: "offered", Points: []Point{{0, 100}, {60, 200}}}}},
		{YLabel: "p99 ms", HLine: 25, Series: []Series{{Name: "p99", Points: []Point{{0, 2}, {30, 40}, {60, 3}}}}},
		{YLabel: "nodes", Series: []Series{{Name: "nodes", Step: true, Points: []Point{{0, 1}, {30, 2}, {60, 2}}}}},
	}}
	var b strings.Builder
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if err := xml.Unmarshal([]byte(out), new(struct{})); err != nil {
		t.Fatalf("not well-formed XML: %v", err)
	}
	for _, want := range []string{"step &lt;2x&gt;", "stroke-dasharray", "offered", "<polyline", "200"} {
		if !strings.Contains(out, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if n := strings.Count(out, "<polyline"); n != 3 {
		t.Errorf("%d lines, want 3", n)
	}
	// The step line has a corner per change: 3 points + 2 corners.
	lines := strings.Split(out, "<polyline")
	if pts := strings.Count(strings.SplitN(lines[3], `"/>`, 2)[0], ","); pts != 5 {
		t.Errorf("step line has %d points, want 5", pts)
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.25: "0.25", 12: "12", 1500: "1.5k", 2.5e6: "2.5M"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}
