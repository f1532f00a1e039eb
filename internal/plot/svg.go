package plot

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Point is one sample of a series.
type Point struct{ X, Y float64 }

// Series is one line.
type Series struct {
	Name   string
	Points []Point
	// Step draws the line as steps (a node count), not straight segments.
	Step bool
}

// Panel is one y axis with its lines; HLine, when non-zero, draws a dashed
// reference line (an SLO).
type Panel struct {
	YLabel string
	Series []Series
	HLine  float64
}

// Chart is a figure: panels stacked over a shared x axis.
type Chart struct {
	Title, XLabel string
	Panels        []Panel
}

const (
	width       = 900
	panelHeight = 180
	marginLeft  = 80
	marginRight = 160
	marginTop   = 40
	gap         = 30
)

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

// WriteSVG draws c.
func (c Chart) WriteSVG(w io.Writer) error {
	height := marginTop + len(c.Panels)*(panelHeight+gap) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="15">%s</text>`+"\n", marginLeft, html.EscapeString(c.Title))
	x0, x1 := c.xRange()
	plotW := float64(width - marginLeft - marginRight)
	sx := func(x float64) float64 { return marginLeft + (x-x0)/(x1-x0)*plotW }
	for i, p := range c.Panels {
		top := float64(marginTop + i*(panelHeight+gap))
		y1 := p.yMax()
		sy := func(y float64) float64 { return top + panelHeight - y/y1*panelHeight }
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#999"/>`+"\n", marginLeft, top, plotW, panelHeight)
		for _, t := range []float64{0, 0.5, 1} {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginLeft-6, sy(t*y1)+4, num(t*y1))
		}
		fmt.Fprintf(&b, `<text transform="translate(16,%.0f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+panelHeight/2, html.EscapeString(p.YLabel))
		if p.HLine > 0 && p.HLine <= y1 {
			fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="5,4"/>`+"\n", marginLeft, marginLeft+plotW, sy(p.HLine), sy(p.HLine))
		}
		for j, s := range p.Series {
			color := colors[j%len(colors)]
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, polyline(s, sx, sy))
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", marginLeft+plotW+8, top+14+float64(j)*16, color, html.EscapeString(s.Name))
		}
	}
	bottom := float64(marginTop + len(c.Panels)*(panelHeight+gap) - gap)
	for _, t := range []float64{0, 0.25, 0.5, 0.75, 1} {
		x := x0 + t*(x1-x0)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", sx(x), bottom+16, num(x))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", marginLeft+plotW/2, bottom+30, html.EscapeString(c.XLabel))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (c Chart) xRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range c.Panels {
		for _, s := range p.Series {
			for _, pt := range s.Points {
				lo, hi = math.Min(lo, pt.X), math.Max(hi, pt.X)
			}
		}
	}
	if !(hi > lo) {
		return 0, 1
	}
	return lo, hi
}

// yMax is the panel's top: its largest value (or reference line) plus 10%.
func (p Panel) yMax() float64 {
	m := p.HLine
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if !math.IsNaN(pt.Y) && !math.IsInf(pt.Y, 0) {
				m = math.Max(m, pt.Y)
			}
		}
	}
	if m <= 0 {
		return 1
	}
	return m * 1.1
}

func polyline(s Series, sx, sy func(float64) float64) string {
	var b strings.Builder
	for i, pt := range s.Points {
		if math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
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
