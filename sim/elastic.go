package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tidekv/tidekv/plot"
)

// ElasticPoint is the cluster during one tick of an elastic run.
type ElasticPoint struct {
	At                        time.Duration
	Offered, Served, Rejected float64 // requests/s
	Nodes                     int     // serving nodes
	Starting                  int     // nodes started, not joined yet
	P99                       time.Duration
	MigrationRate             float64 // bytes/s streaming cluster-wide
	MigrationAllowance        float64 // bytes/s per node the controller grants
	Utilization               float64 // offered / capacity of the serving nodes
}

// ElasticMetrics summarise an elastic run.
type ElasticMetrics struct {
	// ViolationSeconds: seconds whose p99 exceeded the SLO or that refused
	// more than 0.1% of the offered requests.
	ViolationSeconds float64
	// NodeSeconds: serving nodes × seconds.
	NodeSeconds float64
	// MeanUtilization: offered load over serving capacity, averaged.
	MeanUtilization float64
	// ScalingActions: scale-outs and scale-ins started.
	ScalingActions int
	// P99 is the 99th percentile of the per-second p99s.
	P99 time.Duration
}

// SetLoadCurve makes the offered load follow c from the next tick on (the
// workload's other settings stay) and records every tick (Timeline).
func (s *Sim) SetLoadCurve(c LoadCurve) { s.curve = c }

// ElasticTimeline is every tick recorded since SetLoadCurve.
func (s *Sim) ElasticTimeline() []ElasticPoint { return slices.Clone(s.series) }

// recordElastic appends the tick's point.
func (s *Sim) recordElastic() {
	p := ElasticPoint{At: s.clock.Elapsed(), Offered: s.workload.QPS,
		MigrationAllowance: s.loop.Runner.MigrationRate(), Starting: len(s.starting)}
	var capacity, worst, load, rejected float64
	for _, n := range s.nodes {
		if !n.up() {
			continue
		}
		p.Nodes++
		load += n.load
		rejected += n.rejected
		capacity += n.capacity * (1 - n.spec.Steal)
		// The cluster's p99 is the worst p99 among nodes serving a
		// noticeable share (an idle node's tail does not count).
		if n.load > 0.01*s.workload.QPS {
			worst = math.Max(worst, float64(n.p99))
		}
	}
	// Nodes refuse work units (a write costs its followers too); the
	// client's requests are refused in the same proportion.
	if load > 0 {
		p.Rejected = p.Offered * rejected / load
	}
	p.Served = p.Offered - p.Rejected
	for _, f := range s.flights {
		p.MigrationRate += f.rate
	}
	p.P99 = time.Duration(worst)
	if capacity > 0 {
		p.Utilization = p.Offered / capacity
	}
	s.series = append(s.series, p)
}

// Metrics computes the run's summary against the SLO.
func Metrics(points []ElasticPoint, slo time.Duration, tick time.Duration, actions int) ElasticMetrics {
	m := ElasticMetrics{ScalingActions: actions}
	var p99s []float64
	for _, p := range points {
		sec := tick.Seconds()
		if p.P99 > slo || p.Rejected > 0.001*p.Offered {
			m.ViolationSeconds += sec
		}
		m.NodeSeconds += float64(p.Nodes) * sec
		m.MeanUtilization += p.Utilization
		p99s = append(p99s, float64(p.P99))
	}
	if len(points) > 0 {
		m.MeanUtilization /= float64(len(points))
		slices.Sort(p99s)
		m.P99 = time.Duration(p99s[int(math.Ceil(0.99*float64(len(p99s))))-1])
	}
	return m
}

// WriteElasticCSV writes the timeline, one row per tick.
func WriteElasticCSV(w io.Writer, points []ElasticPoint) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"seconds", "offered_ops", "served_ops", "rejected_ops", "nodes", "p99_ms", "migration_bytes_per_sec", "migration_allowance", "utilization"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for _, p := range points {
		_ = cw.Write([]string{f(p.At.Seconds()), f(math.Round(p.Offered)), f(math.Round(p.Served)), f(math.Round(p.Rejected)),
			strconv.Itoa(p.Nodes), f(float64(p.P99.Microseconds()) / 1000), f(math.Round(p.MigrationRate)),
			f(math.Round(p.MigrationAllowance)), strconv.FormatFloat(p.Utilization, 'f', 3, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// ElasticChart draws a timeline: offered and served load, nodes, p99
// against the SLO, and migration traffic. Long timelines are drawn from
// every k-th point (at most chartPoints), which keeps a plot small.
func ElasticChart(title string, points []ElasticPoint, slo time.Duration) plot.Chart {
	var offered, served, nodes, p99, mig, allow []plot.Point
	every := (len(points) + chartPoints - 1) / chartPoints
	for i, p := range points {
		if i%max(every, 1) != 0 {
			continue
		}
		x := p.At.Seconds()
		offered = append(offered, plot.Point{X: x, Y: p.Offered})
		served = append(served, plot.Point{X: x, Y: p.Served})
		nodes = append(nodes, plot.Point{X: x, Y: float64(p.Nodes)})
		p99 = append(p99, plot.Point{X: x, Y: float64(p.P99.Microseconds()) / 1000})
		mig = append(mig, plot.Point{X: x, Y: p.MigrationRate / (1 << 20)})
		allow = append(allow, plot.Point{X: x, Y: p.MigrationAllowance / (1 << 20)})
	}
	return plot.Chart{Title: title, XLabel: "seconds", Panels: []plot.Panel{
		{YLabel: "requests/s", Series: []plot.Series{{Name: "offered", Points: offered}, {Name: "served", Points: served}}},
		{YLabel: "nodes", Integer: true, Series: []plot.Series{{Name: "serving nodes", Points: nodes, Step: true}}},
		{YLabel: "p99 (ms)", HLine: float64(slo.Microseconds()) / 1000, Series: []plot.Series{{Name: "p99", Points: p99}}},
		{YLabel: "migration (MiB/s)", Series: []plot.Series{{Name: "streaming", Points: mig}, {Name: "allowance/node", Points: allow}}},
	}}
}

// chartPoints bounds the points per series of an elastic chart.
const chartPoints = 600

func (m ElasticMetrics) String() string {
	return fmt.Sprintf("violation=%.0fs node-seconds=%.0f utilization=%.2f actions=%d p99=%v",
		m.ViolationSeconds, m.NodeSeconds, m.MeanUtilization, m.ScalingActions, m.P99.Round(100*time.Microsecond))
}
