package scenario

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/tidekv/tidekv/plot"
)

// writeFigure writes c as DIR/<scenario>-<name>.svg into opts.Out (nothing
// when it is empty) and links it from the report, so that the picture
// sits next to its table.
func writeFigure(opts Options, out io.Writer, scenario, name string, c plot.Chart) error {
	if opts.Out == "" {
		return nil
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(opts.Out, scenario+"-"+name+".svg")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := c.WriteSVG(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "![%s](%s)\n\n", c.Title, path)
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// share is n/of in percent, NaN (not drawn) when nothing was offered.
func share(n, of float64) float64 {
	if of <= 0 {
		return math.NaN()
	}
	return 100 * n / of
}

// fullnessBins counts fullness values (1 = Θmax) in 10%-wide bins; X is
// the bin's centre in percent, and every bin up to the fullest is present.
func fullnessBins(xs []float64) []plot.Point {
	var counts []float64
	for _, x := range xs {
		i := max(int(x*10), 0)
		for len(counts) <= i {
			counts = append(counts, 0)
		}
		counts[i]++
	}
	pts := make([]plot.Point, len(counts))
	for i, n := range counts {
		pts[i] = plot.Point{X: float64(i*10 + 5), Y: n}
	}
	return pts
}

// partitioningChart is ElasCass's fullness histogram: one panel per Θmax,
// ranges per 10% of Θmax, by exact bytes and by reported size.
func partitioningChart(results []partitioningResult) plot.Chart {
	c := plot.Chart{Title: "partitioning: range fullness after the load (share of Θmax)", XLabel: "fullness, % of Θmax",
		Marks: []plot.Mark{{X: 100, Label: "Θmax"}}}
	hi := 100.0
	for _, r := range results {
		exact, reported := fullnessBins(r.exact), fullnessBins(r.reported)
		for _, bins := range [][]plot.Point{exact, reported} {
			if len(bins) > 0 {
				hi = max(hi, bins[len(bins)-1].X+5)
			}
		}
		c.Panels = append(c.Panels, plot.Panel{YLabel: fmt.Sprintf("ranges, Θmax %s MiB", plMiB(float64(r.maxBytes))), Integer: true, Series: []plot.Series{
			{Name: "exact bytes", Bars: true, Points: exact},
			{Name: "reported size", Bars: true, Points: reported},
		}})
	}
	// Bin edges read better than the axis's quarter points.
	for x := 0.0; x <= hi; x += 20 {
		c.XTicks = append(c.XTicks, plot.Mark{X: x, Label: fmt.Sprintf("%.0f%%", x)})
	}
	return c
}

// partitioningLoadChart draws, per Θmax, the ranges' fullness at each look
// during the load against the data loaded so far: the mean, the fullest
// and the emptiest range, and the sawtooth that splits in step at fill ×
// Θmax would draw.
func partitioningLoadChart(results []partitioningResult, fill float64) plot.Chart {
	c := plot.Chart{Title: "partitioning: range fullness while loading (% of Θmax)", XLabel: "data loaded, MiB"}
	for _, r := range results {
		var mean, full, empty []plot.Point
		for _, smp := range r.samples {
			x := float64(smp.data) / (1 << 20)
			m, _ := plMeanStd(smp.exact)
			mean = append(mean, plot.Point{X: x, Y: 100 * m})
			full = append(full, plot.Point{X: x, Y: 100 * plQuantile(smp.exact, 1)})
			empty = append(empty, plot.Point{X: x, Y: 100 * plQuantile(smp.exact, 0)})
		}
		c.Panels = append(c.Panels, plot.Panel{YLabel: fmt.Sprintf("%% of Θmax %s MiB", plMiB(float64(r.maxBytes))), Series: []plot.Series{
			{Name: "mean", Points: mean}, {Name: "fullest range", Points: full}, {Name: "emptiest range", Points: empty},
			{Name: "splits in step", Points: inStepSawtooth(max(r.data, lastData(r.samples)), r.maxBytes, fill)},
		}})
	}
	return c
}

// lastData is the data the last look found, 0 without looks.
func lastData(samples []fullnessSample) uint64 {
	if len(samples) == 0 {
		return 0
	}
	return samples[len(samples)-1].data
}

// inStepSawtooth is splitInStep's fullness (in %) from no data to data:
// rising with the data, halving at each split line.
func inStepSawtooth(data, maxBytes uint64, fill float64) []plot.Point {
	pts := []plot.Point{{X: 0, Y: 0}}
	line := fill * float64(maxBytes)
	for n := 1.0; n*line < float64(data); n *= 2 {
		x := n * line / (1 << 20)
		pts = append(pts, plot.Point{X: x, Y: 100 * fill}, plot.Point{X: x, Y: 100 * fill / 2})
	}
	end := splitInStep(data, maxBytes, fill)
	return append(pts, plot.Point{X: float64(data) / (1 << 20), Y: 100 * end.fullness})
}

// scaleoutSample is the cluster as one status poll during a join saw it.
type scaleoutSample struct {
	at                    float64 // seconds since the new process started
	qps, replicas, leases map[uint64]float64
}

// scaleoutChart draws one join: per-node load, replicas and leases over
// time, with the moments the new node first served (took a lease), ended
// bootstrap phase 1 and was live.
func scaleoutChart(st scaleoutStep) plot.Chart {
	var ids []uint64
	for _, s := range st.samples {
		for id := range s.replicas {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	panel := func(label string, get func(scaleoutSample) map[uint64]float64, step bool) plot.Panel {
		// The stepped panels count replicas and leases.
		p := plot.Panel{YLabel: label, Integer: step}
		for _, id := range ids {
			s := plot.Series{Name: fmt.Sprintf("node %d", id), Step: step}
			for _, smp := range st.samples {
				s.Points = append(s.Points, plot.Point{X: smp.at, Y: get(smp)[id]})
			}
			p.Series = append(p.Series, s)
		}
		return p
	}
	c := plot.Chart{Title: fmt.Sprintf("scaleout: %d → %d nodes (node %d joins)", st.nodes-1, st.nodes, st.nodeID),
		XLabel: "seconds since the new node's process started",
		Panels: []plot.Panel{
			panel("requests/s", func(s scaleoutSample) map[uint64]float64 { return s.qps }, false),
			panel("replicas", func(s scaleoutSample) map[uint64]float64 { return s.replicas }, true),
			panel("leases", func(s scaleoutSample) map[uint64]float64 { return s.leases }, true),
		}}
	if st.firstLease >= 0 {
		c.Marks = append(c.Marks, plot.Mark{X: st.firstLease.Seconds(), Label: "serving"})
	}
	if st.phase1 && st.phase1End >= 0 {
		c.Marks = append(c.Marks, plot.Mark{X: st.phase1End.Seconds(), Label: "phase 1 ends"})
	}
	if st.live >= 0 {
		c.Marks = append(c.Marks, plot.Mark{X: st.live.Seconds(), Label: "live"})
	}
	return c
}

// meteorChart is read latency against the WAN round trip, per read mode.
func meteorChart(rows []meteorRow) plot.Chart {
	var modes []string
	for _, r := range rows {
		if !slices.Contains(modes, r.mode) {
			modes = append(modes, r.mode)
		}
	}
	p50, p99 := plot.Panel{YLabel: "p50 ms"}, plot.Panel{YLabel: "p99 ms"}
	for _, m := range modes {
		a, b := plot.Series{Name: m}, plot.Series{Name: m}
		for _, r := range rows {
			if r.mode == m {
				x := ms(r.rtt)
				a.Points = append(a.Points, plot.Point{X: x, Y: ms(r.res.Q(0.5))})
				b.Points = append(b.Points, plot.Point{X: x, Y: ms(r.res.Q(0.99))})
			}
		}
		p50.Series, p99.Series = append(p50.Series, a), append(p99.Series, b)
	}
	return plot.Chart{Title: "meteorshower: read latency against the round trip between regions", XLabel: "RTT ms",
		Panels: []plot.Panel{p50, p99}}
}

// adaptiveChart is the failed-read share and p99 against the offered read
// rate, one line per configuration.
func adaptiveChart(configs []adaptiveConfig, results map[string][]adaptiveStep) plot.Chart {
	failed, p99 := plot.Panel{YLabel: "failed % of sent"}, plot.Panel{YLabel: "p99 ms"}
	for _, c := range configs {
		f, l := plot.Series{Name: c.name}, plot.Series{Name: c.name}
		for _, s := range results[c.name] {
			fails := float64(s.overloaded + s.timeouts + s.other + s.dropped)
			f.Points = append(f.Points, plot.Point{X: float64(s.rate), Y: share(fails, float64(s.sent))})
			l.Points = append(l.Points, plot.Point{X: float64(s.rate), Y: ms(s.p99)})
		}
		failed.Series, p99.Series = append(failed.Series, f), append(p99.Series, l)
	}
	return plot.Chart{Title: "adaptive: failed reads and p99 against the offered read rate", XLabel: "offered reads/s",
		Panels: []plot.Panel{failed, p99}}
}

// adaptiveReactionChart draws the reaction run's failed share per second,
// with the moment each learner started serving marked.
func adaptiveReactionChart(r adaptiveReaction) plot.Chart {
	failed := plot.Series{Name: "RF1 + adaptive, client"}
	for i, n := range r.step.secSent {
		failed.Points = append(failed.Points, plot.Point{X: float64(i), Y: share(float64(r.step.secFailed[i]), float64(n))})
	}
	c := plot.Chart{Title: fmt.Sprintf("adaptive: a step to %d reads/s on a fresh RF1 range, failed reads per second", r.step.rate),
		XLabel: "seconds since the step", Panels: []plot.Panel{{YLabel: "failed % of sent", Series: []plot.Series{failed}}}}
	for i, at := range r.serving {
		c.Marks = append(c.Marks, plot.Mark{X: at.Seconds(), Label: fmt.Sprintf("learner %d serves", i+1)})
	}
	return c
}

// horoscopeChart puts the replica-choice modes side by side as bars, one
// slot per (hogs, workload) case: p99, throughput and errors.
func horoscopeChart(rows []hsRow) plot.Chart {
	type group struct {
		stressed bool
		workload string
	}
	var groups []group
	var modes []string
	for _, r := range rows {
		if g := (group{r.stressed, r.workload}); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
		if !slices.Contains(modes, r.mode) {
			modes = append(modes, r.mode)
		}
	}
	c := plot.Chart{Title: "horoscope: replica choice with and without two CPU-starved nodes", XLabel: "case"}
	for i, g := range groups {
		hogs := "no hogs"
		if g.stressed {
			hogs = "hogs"
		}
		c.XTicks = append(c.XTicks, plot.Mark{X: float64(i), Label: hogs + ", " + g.workload})
	}
	p99, rate, errs := plot.Panel{YLabel: "p99 ms"}, plot.Panel{YLabel: "operations/s"}, plot.Panel{YLabel: "errors % of operations"}
	for _, m := range modes {
		a, b, e := plot.Series{Name: m, Bars: true}, plot.Series{Name: m, Bars: true}, plot.Series{Name: m, Bars: true}
		for _, r := range rows {
			if r.mode == m {
				x := float64(slices.Index(groups, group{r.stressed, r.workload}))
				a.Points = append(a.Points, plot.Point{X: x, Y: ms(r.res.Q(0.99))})
				b.Points = append(b.Points, plot.Point{X: x, Y: r.res.Rate()})
				e.Points = append(e.Points, plot.Point{X: x, Y: share(float64(r.res.Errors), float64(r.res.Ops+r.res.Errors))})
			}
		}
		p99.Series, rate.Series, errs.Series = append(p99.Series, a), append(rate.Series, b), append(errs.Series, e)
	}
	c.Panels = []plot.Panel{p99, rate, errs}
	return c
}
