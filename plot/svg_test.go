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
	// and panel frame rects (the legend's swatches apart).
	if n := len(parse(t, out).find("rect")); n != 6 {
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

// node is an SVG element, parsed for the tests to look inside.
type node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []node     `xml:",any"`
	Text    string     `xml:",chardata"`
}

func parse(t *testing.T, svg string) node {
	t.Helper()
	var n node
	if err := xml.Unmarshal([]byte(svg), &n); err != nil {
		t.Fatalf("not well-formed XML: %v", err)
	}
	return n
}

func (n node) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// find lists the elements named tag under n, depth first, outside the
// legends.
func (n node) find(tag string) []node {
	var out []node
	for _, c := range n.Nodes {
		if c.attr("class") == "legend" {
			continue
		}
		if c.XMLName.Local == tag {
			out = append(out, c)
		}
		out = append(out, c.find(tag)...)
	}
	return out
}

// legends lists the legend groups, one per panel.
func (n node) legends() []node {
	var out []node
	for _, c := range n.Nodes {
		if c.attr("class") == "legend" {
			out = append(out, c)
		}
	}
	return out
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

// Every series has one key in its panel's legend: a swatch drawn in the
// series' own colour and dash, beside its name in dark text (names in the
// series' colour, with no swatch, did not say which line was which).
func TestLegendKeys(t *testing.T) {
	c := Chart{Panels: []Panel{
		{YLabel: "requests/s", Series: []Series{
			{Name: "offered", Points: []Point{{0, 10}, {60, 20}}},
			{Name: "Fig. 9 served", Reference: true, Points: []Point{{0, 9}, {30, 12}, {60, 18}}},
			{Name: "served", Points: []Point{{0, 9}, {60, 19}}},
		}},
		{YLabel: "ranges", Integer: true, Series: []Series{
			{Name: "exact", Bars: true, Points: []Point{{10, 1}, {20, 3}}},
			{Name: "reported", Bars: true, Points: []Point{{10, 2}, {20, 1}}},
		}},
	}}
	svg := parse(t, render(t, c))
	legends := svg.legends()
	if len(legends) != len(c.Panels) {
		t.Fatalf("%d legends for %d panels", len(legends), len(c.Panels))
	}
	lines := svg.find("polyline")
	for i, p := range c.Panels {
		keys := legends[i].Nodes
		if len(keys) != len(p.Series) {
			t.Fatalf("panel %d: %d keys for %d series", i, len(keys), len(p.Series))
		}
		for j, s := range p.Series {
			k := keys[j]
			text := k.find("text")
			if k.attr("class") != "key" || len(text) != 1 || text[0].attr("fill") != "#222" {
				t.Fatalf("panel %d key %d: not a swatch beside a dark name: %+v", i, j, k)
			}
			want := s.Name
			if s.Reference {
				want = "paper: " + s.Name
			}
			if text[0].Text != want {
				t.Errorf("key reads %q, want %q", text[0].Text, want)
			}
			if s.Bars {
				if sw := k.find("rect"); len(sw) != 1 || sw[0].attr("fill") != p.looks()[j].color {
					t.Errorf("bar series %q: swatch %+v", s.Name, sw)
				}
				continue
			}
			// The swatch matches the line drawn: colour and dash.
			line, sw := lines[j], k.find("line")
			if len(sw) != 1 || sw[0].attr("stroke") != line.attr("stroke") || sw[0].attr("stroke-dasharray") != line.attr("stroke-dasharray") {
				t.Errorf("series %q: swatch %+v, line %+v", s.Name, sw, line.Attrs)
			}
			if s.Reference != (len(k.find("circle")) == 1) {
				t.Errorf("series %q: a marker in the key iff it is the paper's", s.Name)
			}
		}
	}
	// The paper's series is grey and dashed with a marker at each of its
	// points, and takes no colour from ours: "served" stays the second
	// colour, as it is without the paper's series.
	if ref := lines[1]; ref.attr("stroke") != referenceColor || ref.attr("stroke-dasharray") == "" {
		t.Errorf("reference series drawn %+v", ref.Attrs)
	}
	if n := len(svg.find("circle")); n != 3 {
		t.Errorf("%d markers, want one per reference point (3)", n)
	}
	if lines[0].attr("stroke") == lines[2].attr("stroke") || lines[2].attr("stroke") != colors[1] {
		t.Errorf("our series' colours: %s, %s", lines[0].attr("stroke"), lines[2].attr("stroke"))
	}
}

// The layout: one key per series, each on its own row.
func TestLegendLayout(t *testing.T) {
	p := Panel{Series: []Series{{Name: "a"}, {Name: "b", Reference: true}, {Name: "c", Step: true}, {Name: "d", Bars: true}}}
	keys := p.legend(40)
	if len(keys) != 4 {
		t.Fatalf("%d keys for 4 series", len(keys))
	}
	for j := 1; j < len(keys); j++ {
		if keys[j].y-keys[j-1].y < legendRow {
			t.Errorf("keys %d and %d overlap: rows at %v and %v", j-1, j, keys[j-1].y, keys[j].y)
		}
	}
	if keys[1].name != "paper: b" || !keys[1].look.marker || keys[1].look.dash == "" || !keys[3].look.bar {
		t.Errorf("keys %+v", keys)
	}
}
