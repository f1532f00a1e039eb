package plot

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Point is one sample of a series.
type Point struct{ X, Y float64 }

// Series is one line.
type Series struct {
	Name   string
	Points []Point
	// Step draws the line as steps (a node count), not straight segments.
	Step bool
	// Bars draws one bar per point instead of a line (a histogram); the
	// bar series of a panel stand side by side within each x slot.
	Bars bool
	// Reference marks values a paper reports, drawn on the same axes as
	// ours: dashed grey with a marker at each point (a single reported
	// value is a lone marker), keyed "paper: Name" in the legend. It takes
	// no colour from the palette, so our series keep theirs whether or not
	// the paper's are drawn.
	Reference bool
}

// Panel is one y axis with its lines; HLine, when non-zero, draws a dashed
// reference line (an SLO). Integer says the values are counts (nodes,
// ranges): the axis then ticks on whole numbers only.
type Panel struct {
	YLabel  string
	Series  []Series
	HLine   float64
	Integer bool
}

// Chart is a figure: panels stacked over a shared x axis. Marks draw
// dashed vertical lines through every panel (a moment: a node starts
// serving); XTicks, when set, replace the numeric x labels (categories
// drawn as bars at 0, 1, 2, ...).
type Chart struct {
	Title, XLabel string
	Panels        []Panel
	Marks         []Mark
	XTicks        []Mark
}

// Mark is a labelled x position.
type Mark struct {
	X     float64
	Label string
}

const (
	plotWidth   = 660
	panelHeight = 180
	marginLeft  = 80
	marginRight = 160 // the legend's room; wider for long series names
	charWidth   = 7   // a generous average at font-size 12
	swatchWidth = 24  // a legend key's sample of the line
	legendRow   = 16
	marginTop   = 40
	gap         = 30
)

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// How a reference (paper) series looks: grey, dashed, hollow markers.
const (
	referenceColor  = "#666"
	referenceDash   = "6,4"
	referencePrefix = "paper: "
)

// look is how one series is drawn, shared by its line and its legend key.
type look struct {
	color, dash string
	marker      bool
	bar         bool
}

// looks gives each series of p its look: ours take the palette's colours
// in order, skipping the reference series.
func (p Panel) looks() []look {
	out := make([]look, len(p.Series))
	k := 0
	for j, s := range p.Series {
		if s.Reference {
			out[j] = look{color: referenceColor, dash: referenceDash, marker: true, bar: s.Bars}
			continue
		}
		out[j] = look{color: colors[k%len(colors)], bar: s.Bars}
		k++
	}
	return out
}

// legendName is the series' name as its key reads.
func (s Series) legendName() string {
	if s.Reference {
		return referencePrefix + s.Name
	}
	return s.Name
}

// key is one legend entry: a swatch in the series' look and its name, at
// a row's baseline y.
type key struct {
	name string
	look look
	y    float64
}

// legend lays out p's keys, one per series, from the panel's top.
func (p Panel) legend(top float64) []key {
	ls := p.looks()
	out := make([]key, len(p.Series))
	for j, s := range p.Series {
		out[j] = key{name: s.legendName(), look: ls[j], y: top + 14 + float64(j)*legendRow}
	}
	return out
}

// writeLegend draws the keys right of the panel at x.
func writeLegend(b *strings.Builder, x float64, keys []key) {
	b.WriteString(`<g class="legend">` + "\n")
	for _, k := range keys {
		b.WriteString(`<g class="key">`)
		mid := k.y - 4
		if k.look.bar {
			fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%d" height="10" fill="%s"/>`, x, mid-5, swatchWidth, k.look.color)
		} else {
			fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/>`, x, x+swatchWidth, mid, mid, k.look.color, dashAttr(k.look.dash))
		}
		if k.look.marker {
			writeMarker(b, x+swatchWidth/2, mid, k.look.color)
		}
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" fill="#222">%s</text></g>`+"\n", x+swatchWidth+6, k.y, html.EscapeString(k.name))
	}
	b.WriteString("</g>\n")
}

func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return fmt.Sprintf(` stroke-dasharray="%s"`, dash)
}

func writeMarker(b *strings.Builder, x, y float64, color string) {
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="white" stroke="%s" stroke-width="1.5"/>`, x, y, color)
}

// WriteSVG draws c.
func (c Chart) WriteSVG(w io.Writer) error {
	height := marginTop + len(c.Panels)*(panelHeight+gap) + 30
	var b strings.Builder
	width := marginLeft + plotWidth + c.legendWidth()
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="15">%s</text>`+"\n", marginLeft, html.EscapeString(c.Title))
	x0, x1, slot := c.xRange()
	plotW := float64(plotWidth)
	sx := func(x float64) float64 { return marginLeft + (x-x0)/(x1-x0)*plotW }
	for i, p := range c.Panels {
		top := float64(marginTop + i*(panelHeight+gap))
		y1, yTicks := p.yAxis()
		sy := func(y float64) float64 { return top + panelHeight - y/y1*panelHeight }
		for _, t := range yTicks {
			if t > 0 && t < y1 {
				fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", marginLeft, marginLeft+plotW, sy(t), sy(t))
			}
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginLeft-6, sy(t)+4, num(t))
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#999"/>`+"\n", marginLeft, top, plotW, panelHeight)
		fmt.Fprintf(&b, `<text transform="translate(16,%.0f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+panelHeight/2, html.EscapeString(p.YLabel))
		if p.HLine > 0 && p.HLine <= y1 {
			fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="5,4"/>`+"\n", marginLeft, marginLeft+plotW, sy(p.HLine), sy(p.HLine))
		}
		bars := p.barLayout(slot * plotW / (x1 - x0))
		looks := p.looks()
		for j, s := range p.Series {
			l := looks[j]
			if s.Bars {
				writeBars(&b, s, l.color, sx, sy, top+panelHeight, bars[j])
			} else {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", l.color, dashAttr(l.dash), polyline(s, sx, sy))
			}
			if l.marker && !s.Bars {
				for _, pt := range s.Points {
					if finite(pt.Y) {
						writeMarker(&b, sx(pt.X), sy(pt.Y), l.color)
					}
				}
				b.WriteString("\n")
			}
		}
		writeLegend(&b, marginLeft+plotW+8, p.legend(top))
	}
	bottom := float64(marginTop + len(c.Panels)*(panelHeight+gap) - gap)
	for _, m := range c.Marks {
		if m.X < x0 || m.X > x1 {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.0f" stroke="#555" stroke-dasharray="3,3"/>`+"\n", sx(m.X), sx(m.X), marginTop, bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11">%s</text>`+"\n", sx(m.X)+3, marginTop-4, html.EscapeString(m.Label))
	}
	ticks := c.XTicks
	if len(ticks) == 0 {
		for _, x := range xTicks(x0, x1) {
			ticks = append(ticks, Mark{X: x, Label: num(x)})
		}
	}
	for _, t := range ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", sx(t.X), bottom+16, html.EscapeString(t.Label))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", marginLeft+plotW/2, bottom+30, html.EscapeString(c.XLabel))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// legendWidth fits the longest series name right of the panels.
func (c Chart) legendWidth() int {
	w := marginRight
	for _, p := range c.Panels {
		for _, s := range p.Series {
			w = max(w, 8+swatchWidth+6+charWidth*utf8.RuneCountInString(s.legendName()))
		}
	}
	return w
}

// xRange is the shared x axis and the width of one bar slot (the closest
// spacing of bar x values). Bars need half a slot of room at each end.
func (c Chart) xRange() (lo, hi, slot float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	var barXs []float64
	for _, p := range c.Panels {
		for _, s := range p.Series {
			for _, pt := range s.Points {
				lo, hi = math.Min(lo, pt.X), math.Max(hi, pt.X)
				if s.Bars {
					barXs = append(barXs, pt.X)
				}
			}
		}
	}
	for _, m := range c.Marks {
		lo, hi = math.Min(lo, m.X), math.Max(hi, m.X)
	}
	slices.Sort(barXs)
	slot = math.Inf(1)
	for i := 1; i < len(barXs); i++ {
		if d := barXs[i] - barXs[i-1]; d > 0 {
			slot = math.Min(slot, d)
		}
	}
	if len(barXs) > 0 {
		if math.IsInf(slot, 1) {
			slot = 1 // one x value: a unit-wide slot
		}
		lo, hi = lo-slot/2, hi+slot/2
	}
	if !(hi > lo) {
		return 0, 1, 0
	}
	return lo, hi, slot
}

// barSlot is where one bar series draws within an x slot, in pixels.
type barSlot struct{ off, w float64 }

// barLayout gives each bar series of p its offset and width in pixels
// within a slot of slotPx pixels; zero for line series.
func (p Panel) barLayout(slotPx float64) []barSlot {
	out := make([]barSlot, len(p.Series))
	n := 0
	for _, s := range p.Series {
		if s.Bars {
			n++
		}
	}
	if n == 0 {
		return out
	}
	w := 0.8 * slotPx / float64(n)
	k := 0
	for j, s := range p.Series {
		if s.Bars {
			out[j].off, out[j].w = -0.4*slotPx+float64(k)*w, w
			k++
		}
	}
	return out
}

func writeBars(b *strings.Builder, s Series, color string, sx, sy func(float64) float64, base float64, l barSlot) {
	for _, pt := range s.Points {
		if !finite(pt.Y) || pt.Y <= 0 {
			continue
		}
		y := sy(pt.Y)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", sx(pt.X)+l.off, y, l.w, base-y, color)
	}
}

func polyline(s Series, sx, sy func(float64) float64) string {
	var b strings.Builder
	for i, pt := range s.Points {
		if !finite(pt.Y) {
			continue
		}
		if s.Step && i > 0 {
			fmt.Fprintf(&b, "%.1f,%.1f ", sx(pt.X), sy(s.Points[i-1].Y))
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", sx(pt.X), sy(pt.Y))
	}
	return strings.TrimSpace(b.String())
}

// num prints an axis label compactly (1.5k, 12, 0.25).
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	case a >= 10 || a == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
