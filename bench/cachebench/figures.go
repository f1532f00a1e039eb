package cachebench

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tidekv/tidekv/plot"
)

// MigrationChart draws the time of each migration per index, side by side
// (the paper's Fig. 5 shows their mean, minimum and maximum), and below it
// the keys each moved, which halve as the spans shrink.
func MigrationChart(cfg MigrationConfig, results []MigrationResult) plot.Chart {
	c := plot.Chart{
		Title:  fmt.Sprintf("Migration time per index: %d keys of %d B, a span's lower half moved to a new node each time", cfg.Keys, cfg.ValueBytes),
		XLabel: "migration (the cache grows from 1 node to one more each time)",
	}
	times := plot.Panel{YLabel: "ms per migration"}
	moved := plot.Series{Name: "keys moved"}
	for _, r := range results {
		s := plot.Series{Name: r.Index, Bars: true}
		for i, m := range r.Migrations {
			s.Points = append(s.Points, plot.Point{X: float64(i + 1), Y: float64(m.Total().Microseconds()) / 1000})
		}
		times.Series = append(times.Series, s)
	}
	if len(results) > 0 {
		for i, m := range results[0].Migrations {
			moved.Points = append(moved.Points, plot.Point{X: float64(i + 1), Y: float64(m.Keys)})
			c.XTicks = append(c.XTicks, plot.Mark{X: float64(i + 1), Label: fmt.Sprint(i + 1)})
		}
	}
	moved.Bars = true
	c.Panels = []plot.Panel{times, {YLabel: "keys moved", Integer: true, Series: []plot.Series{moved}}}
	return c
}

// fig3PaperNodes is the number of nodes the paper's growing cache ends
// its run with, per query rate: 8 at 50 queries a step (its Fig. 3(a)),
// 15 at 255 (Fig. 3(b)), as docs/benchmarks/cache.md reads them. The
// paper's miss rates are read there only as shapes, so no curve of
// theirs is drawn.
var fig3PaperNodes = map[int]struct {
	nodes  float64
	figure string
}{50: {8, "Fig. 3(a)"}, 255: {15, "Fig. 3(b)"}}

// Fig3Chart draws the miss rate per bucket of the runs at one rate, and
// the nodes serving each of them, with the paper's node count at the end
// of its run where it reports one for this rate.
func Fig3Chart(cfg Fig3Config, rate int, runs []Fig3Run) plot.Chart {
	miss, nodes := fig3Panels(cfg, rate, runs, "miss rate")
	nodes.Series = append(nodes.Series, fig3PaperSeries(cfg, rate)...)
	return plot.Chart{
		Title:  fmt.Sprintf("Miss rate, %d queries a step over %d keys, %d KiB a node", rate, cfg.Keys, cfg.CapacityPerNode>>10),
		XLabel: fmt.Sprintf("time step (miss rate over the last %d steps)", cfg.BucketSteps),
		Panels: []plot.Panel{miss, nodes},
	}
}

// RealFig3Chart draws a real-process run at one rate beside the model's
// run of the same config: the real cluster's miss rates, the model's on
// the panel below with the same axes, and the nodes of both (the model's
// growing cache as "model: elastic").
func RealFig3Chart(cfg Fig3Config, rate int, real, model []Fig3Run) plot.Chart {
	realMiss, nodes := fig3Panels(cfg, rate, real, "miss rate, real cluster")
	modelMiss, modelNodes := fig3Panels(cfg, rate, model, "miss rate, model")
	for _, s := range modelNodes.Series {
		if s.Name == "elastic" {
			s.Name = "model: elastic"
			nodes.Series = append(nodes.Series, s)
		}
	}
	return plot.Chart{
		Title:  fmt.Sprintf("Miss rate on real processes and in the model, %d reads a second over %d keys, %d KiB a node", rate, cfg.Keys, cfg.CapacityPerNode>>10),
		XLabel: fmt.Sprintf("seconds (a model step is one; miss rate over the last %d)", cfg.BucketSteps),
		Panels: []plot.Panel{realMiss, modelMiss, nodes},
	}
}

// fig3Panels are the miss-rate panel (labelled label) and the nodes panel
// of the runs at one rate.
func fig3Panels(cfg Fig3Config, rate int, runs []Fig3Run, label string) (miss, nodes plot.Panel) {
	miss, nodes = plot.Panel{YLabel: label}, plot.Panel{YLabel: "nodes", Integer: true}
	for _, r := range runs {
		if r.Rate != rate {
			continue
		}
		ms, ns := plot.Series{Name: r.Variant}, plot.Series{Name: r.Variant, Step: true}
		for i := range r.MissRate {
			x := float64(min((i+1)*cfg.BucketSteps, cfg.Steps))
			ms.Points = append(ms.Points, plot.Point{X: x, Y: r.MissRate[i]})
			ns.Points = append(ns.Points, plot.Point{X: x, Y: float64(r.Nodes[i])})
		}
		miss.Series = append(miss.Series, ms)
		nodes.Series = append(nodes.Series, ns)
	}
	return miss, nodes
}

// fig3PaperSeries is the paper's node count at the end of its run at
// rate, where it reports one.
func fig3PaperSeries(cfg Fig3Config, rate int) []plot.Series {
	p, ok := fig3PaperNodes[rate]
	if !ok {
		return nil
	}
	return []plot.Series{{Name: "growing cache at the end, " + p.figure, Reference: true,
		Points: []plot.Point{{X: float64(cfg.Steps), Y: p.nodes}}}}
}

// WriteSVG writes c into dir as name.svg and returns the path.
func WriteSVG(dir, name string, c plot.Chart) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".svg")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	err = c.WriteSVG(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// PrelaunchChart draws each variant's fullest node, as a share of its
// capacity, at each once-a-second look (1 is the capacity: a node there
// evicts), and the live nodes.
func PrelaunchChart(cfg PrelaunchConfig, runs []PrelaunchRun) plot.Chart {
	full := plot.Panel{YLabel: "fullest node / capacity", HLine: 1}
	nodes := plot.Panel{YLabel: "nodes", Integer: true}
	for _, r := range runs {
		fs := plot.Series{Name: r.Variant}
		for i, f := range r.Fullest {
			fs.Points = append(fs.Points, plot.Point{X: float64(i + 1), Y: f})
		}
		ns := plot.Series{Name: r.Variant, Step: true, Points: []plot.Point{{X: 0, Y: float64(cfg.Nodes)}}}
		for i, j := range r.JoinedSeconds {
			ns.Points = append(ns.Points, plot.Point{X: j, Y: float64(cfg.Nodes + i + 1)})
		}
		ns.Points = append(ns.Points, plot.Point{X: float64(len(r.Fullest)), Y: float64(cfg.Nodes + len(r.JoinedSeconds))})
		full.Series = append(full.Series, fs)
		nodes.Series = append(nodes.Series, ns)
	}
	return plot.Chart{
		Title: fmt.Sprintf("Scale-out with and without pre-launch on real processes: %s a node, written at %.0f KiB/s",
			mib(cfg.CapacityPerNode), cfg.WriteRate/(1<<10)),
		XLabel: "seconds",
		Panels: []plot.Panel{full, nodes},
	}
}
