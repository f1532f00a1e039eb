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
	miss := plot.Panel{YLabel: "miss rate"}
	nodes := plot.Panel{YLabel: "nodes", Integer: true}
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
	if p, ok := fig3PaperNodes[rate]; ok {
		nodes.Series = append(nodes.Series, plot.Series{Name: "growing cache at the end, " + p.figure, Reference: true,
			Points: []plot.Point{{X: float64(cfg.Steps), Y: p.nodes}}})
	}
	return plot.Chart{
		Title:  fmt.Sprintf("Miss rate, %d queries a step over %d keys, %d KiB a node", rate, cfg.Keys, cfg.CapacityPerNode>>10),
		XLabel: fmt.Sprintf("time step (miss rate over the last %d steps)", cfg.BucketSteps),
		Panels: []plot.Panel{miss, nodes},
	}
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
