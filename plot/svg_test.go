package plot

import (
	"encoding/xml"
	"math"
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

func render(t *testing.T, c Chart) string {
	t.Helper()
	var b strings.Builder
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal([]byte(b.String()), new(struct{})); err != nil {
		t.Fatalf("not well-formed XML: %v", err)
	}
	return b.String()
}

func TestBars(t *testing.T) {
	c := Chart{XLabel: "fullness %", Panels: []Panel{{YLabel: "ranges", Series: []Series{
		{Name: "exact", Bars: true, Points: []Point{{10, 1}, {20, 3}, {30, 0}}},
		{Name: "reported", Bars: true, Points: []Point{{10, 2}, {20, 1}}},
	}}}}
	x0, x1, slot := c.xRange()
	// Half a slot of room either side, so the end bars are not cut.
	if x0 != 5 || x1 != 35 || slot != 10 {
		t.Errorf("x range %v..%v slot %v, want 5..35 slot 10", x0, x1, slot)
	}
	out := render(t, c)
	// Zero-height bars are not drawn: 2 + 2 bars, plus the background
	// and panel frame rects.
	if n := strings.Count(out, "<rect"); n != 6 {
		t.Errorf("%d rects, want 6", n)
	}
	if strings.Contains(out, "<polyline") {
		t.Error("bar series drawn as a line")
	}
	l := c.Panels[0].barLayout(100)
	if l[0].w != 40 || l[1].off != l[0].off+40 {
		t.Errorf("bars overlap or misplaced: %+v", l)
	}
}

func TestMarks(t *testing.T) {
	c := Chart{Panels: []Panel{{Series: []Series{{Name: "qps", Points: []Point{{0, 1}, {10, 2}}}}}},
		Marks: []Mark{{X: 4, Label: "serving"}, {X: 50, Label: "outside"}}}
	out := render(t, c)
	if !strings.Contains(out, "serving") || !strings.Contains(out, `stroke-dasharray="3,3"`) {
		t.Error("mark not drawn")
	}
	// A mark widens the axis rather than falling off it.
	if _, x1, _ := c.xRange(); x1 != 50 {
		t.Errorf("x axis ends at %v, want 50", x1)
	}
}

func TestDegenerateInput(t *testing.T) {
	for name, c := range map[string]Chart{
		"no panels":   {Title: "empty"},
		"no points":   {Panels: []Panel{{Series: []Series{{Name: "a"}, {Name: "b", Bars: true}}}}},
		"one point":   {Panels: []Panel{{Series: []Series{{Name: "a", Points: []Point{{3, 3}}}}}}},
		"one bar":     {Panels: []Panel{{Series: []Series{{Name: "a", Bars: true, Points: []Point{{3, 3}}}}}}},
		"NaN and Inf": {Panels: []Panel{{Series: []Series{{Name: "a", Points: []Point{{0, math.NaN()}, {1, math.Inf(1)}, {2, 1}}}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			out := render(t, c)
			if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
				t.Errorf("non-finite coordinate in output")
			}
		})
	}
	if x0, x1, _ := (Chart{Panels: []Panel{{Series: []Series{{Bars: true, Points: []Point{{3, 3}}}}}}}).xRange(); x0 != 2.5 || x1 != 3.5 {
		t.Errorf("one bar: x range %v..%v, want 2.5..3.5", x0, x1)
	}
}

func TestXTicks(t *testing.T) {
	c := Chart{XTicks: []Mark{{X: 0, Label: "hogs, get"}, {X: 1, Label: "hogs & scan"}},
		Panels: []Panel{{Series: []Series{{Name: "p99", Bars: true, Points: []Point{{0, 5}, {1, 7}}}}}}}
	out := render(t, c)
	if !strings.Contains(out, ">hogs, get<") || !strings.Contains(out, ">hogs &amp; scan<") {
		t.Error("category labels missing")
	}
	// The numeric quartile labels give way to the categories.
	if strings.Contains(out, ">-0.5<") || strings.Contains(out, ">0.25<") {
		t.Error("numeric x labels drawn alongside categories")
	}
}

func TestLegendFitsLongNames(t *testing.T) {
	short := Chart{Panels: []Panel{{Series: []Series{{Name: "p99", Points: []Point{{0, 1}}}}}}}
	if !strings.Contains(render(t, short), `width="900"`) {
		t.Error("short names changed the default width")
	}
	long := Chart{Panels: []Panel{{Series: []Series{{Name: "RF1 + adaptive, client refreshing ranges", Points: []Point{{0, 1}}}}}}}
	if w := long.legendWidth(); w < 8+7*40 {
		t.Errorf("legend %d px wide for a 40-character name", w)
	}
}
