package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tidekv/tidekv/plot"
)

// Chart draws the phase's timeline: throughput (and errors) and p99 per
// second.
func (p *PhaseResult) Chart(title string) plot.Chart {
	return timelineChart(title, "ops/s", "errors/s", p.Timeline)
}

// timelineChart draws a timeline: what finished and what failed per second
// (series done and failed, whose unit the left axis takes from done) and
// the p99 of what succeeded. Seconds in which nothing succeeded have no p99
// point rather than a misleading zero; the line passes over them.
func timelineChart(title, done, failed string, tl []TimelinePoint) plot.Chart {
	ops, errs, p99 := plot.Series{Name: done}, plot.Series{Name: failed}, plot.Series{Name: "p99"}
	for _, t := range tl {
		x := float64(t.Second)
		ops.Points = append(ops.Points, plot.Point{X: x, Y: t.OpsPerSec})
		errRate := 0.0
		if t.Ops > 0 {
			errRate = t.OpsPerSec * float64(t.Errors) / float64(t.Ops)
		}
		errs.Points = append(errs.Points, plot.Point{X: x, Y: errRate})
		if t.Ops > t.Errors {
			p99.Points = append(p99.Points, plot.Point{X: x, Y: t.P99Ms})
		}
	}
	return plot.Chart{Title: title, XLabel: "seconds since the phase started", Panels: []plot.Panel{
		{YLabel: done, Series: []plot.Series{ops, errs}},
		{YLabel: "p99 ms (per second)", Series: []plot.Series{p99}},
	}}
}

// WriteFigures writes one SVG per phase into dir, named
// ycsb-WORKLOAD-PHASE.svg, and returns their paths.
func (r *Result) WriteFigures(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := r.Config
	var paths []string
	for _, p := range []*PhaseResult{r.Load, r.Run} {
		if p == nil {
			continue
		}
		title := fmt.Sprintf("YCSB %s, %s phase: %d records, %d threads, %s distribution", c.Workload, p.Phase, c.RecordCount, c.Threads, c.Distribution)
		if p.Phase == "load" {
			title = fmt.Sprintf("YCSB %s, load phase: %d records, %d threads", c.Workload, c.RecordCount, c.LoadThreads)
		}
		path := filepath.Join(dir, fmt.Sprintf("ycsb-%s-%s.svg", c.Workload, p.Phase))
		f, err := os.Create(path)
		if err != nil {
			return paths, err
		}
		err = p.Chart(title).WriteSVG(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return paths, fmt.Errorf("writing %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
