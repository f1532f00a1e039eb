package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Result is the outcome of Run. It marshals to JSON as is.
type Result struct {
	// Config is the configuration that ran, with defaults (distribution,
	// load threads, seed) filled in.
	Config Config `json:"config"`
	// Load is the load phase; nil with Config.SkipLoad.
	Load *PhaseResult `json:"load,omitempty"`
	// Run is the run phase; nil if the load phase was cancelled.
	Run *PhaseResult `json:"run,omitempty"`
}

// PhaseResult summarises one phase.
type PhaseResult struct {
	// Phase is "load" or "run".
	Phase string `json:"phase"`
	// Operations counts completed operations, failed ones included.
	Operations int64 `json:"operations"`
	// Errors counts failed operations.
	Errors int64 `json:"errors"`
	// ElapsedSeconds is the phase's wall time.
	ElapsedSeconds float64 `json:"elapsed_s"`
	// Throughput is Operations per second of wall time.
	Throughput float64 `json:"ops_per_sec"`
	// Stopped says why the phase ended: StoppedCompleted,
	// StoppedDuration or StoppedCanceled.
	Stopped string `json:"stopped"`
	// Ops has one entry per operation kind that ran, in the order READ,
	// UPDATE, INSERT, SCAN, READ-MODIFY-WRITE.
	Ops []OpResult `json:"ops"`
	// Cost is the servers' work per operation (RunWithCost only).
	Cost
	// Timeline has one point per second of the phase.
	Timeline []TimelinePoint `json:"timeline"`
}

// OpResult summarises one operation kind in one phase. Latencies are in
// milliseconds over successful operations; they are 0 when none succeeded.
type OpResult struct {
	Op         string  `json:"op"`
	Count      int64   `json:"count"`     // operations, failed ones included
	Errors     int64   `json:"errors"`    // failed operations
	NotFound   int64   `json:"not_found"` // reads that found no record
	Throughput float64 `json:"ops_per_sec"`
	AvgMs      float64 `json:"avg_ms"`
	MinMs      float64 `json:"min_ms"`
	P50Ms      float64 `json:"p50_ms"`
	P95Ms      float64 `json:"p95_ms"`
	P99Ms      float64 `json:"p99_ms"`
	P999Ms     float64 `json:"p999_ms"`
	MaxMs      float64 `json:"max_ms"`
}

// summarize merges the workers' statistics into a PhaseResult.
func summarize(name string, workers []*worker, elapsed time.Duration, stopped string) *PhaseResult {
	pr := &PhaseResult{
		Phase:          name,
		ElapsedSeconds: elapsed.Seconds(),
		Stopped:        stopped,
		Ops:            []OpResult{},
	}
	for k := range numOpKinds {
		var merged *opStats
		for _, w := range workers {
			s := w.stats[k]
			if s == nil {
				continue
			}
			if merged == nil {
				merged = new(opStats)
			}
			merged.hist.merge(&s.hist)
			merged.errors += s.errors
			merged.notFound += s.notFound
		}
		if merged == nil {
			continue
		}
		h := &merged.hist
		count := int64(h.n) + merged.errors
		ms := func(ns uint64) float64 { return float64(ns) / 1e6 }
		pr.Ops = append(pr.Ops, OpResult{
			Op:         k.String(),
			Count:      count,
			Errors:     merged.errors,
			NotFound:   merged.notFound,
			Throughput: rate(count, elapsed),
			AvgMs:      h.mean() / 1e6,
			MinMs:      ms(h.min),
			P50Ms:      ms(h.quantile(0.50)),
			P95Ms:      ms(h.quantile(0.95)),
			P99Ms:      ms(h.quantile(0.99)),
			P999Ms:     ms(h.quantile(0.999)),
			MaxMs:      ms(h.max),
		})
		pr.Operations += count
		pr.Errors += merged.errors
	}
	pr.Throughput = rate(pr.Operations, elapsed)
	return pr
}

// WriteJSON writes r as one indented JSON object.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r as a human-readable report: a header with the
// configuration, then per phase a summary line and a table with one row per
// operation kind.
func (r *Result) WriteTable(w io.Writer) error {
	c := r.Config
	ops := fmt.Sprint(c.OperationCount)
	if c.OperationCount == 0 {
		ops = "unbounded"
	}
	fmt.Fprintf(w, "YCSB workload %s, %s distribution: %d records, %s operations, %d threads (%d load), seed %d",
		c.Workload, c.Distribution, c.RecordCount, ops, c.Threads, c.LoadThreads, c.Seed)
	if c.Duration > 0 {
		fmt.Fprintf(w, ", at most %s", c.Duration)
	}
	if c.ReadMode != "" {
		fmt.Fprintf(w, ", %s reads", c.ReadMode)
	}
	if c.Transport != "" {
		fmt.Fprintf(w, ", %s requests", c.Transport)
	}
	fmt.Fprintln(w)
	for _, p := range []*PhaseResult{r.Load, r.Run} {
		if p == nil {
			continue
		}
		fmt.Fprintln(w)
		if err := p.writeTable(w); err != nil {
			return err
		}
	}
	return nil
}

func (p *PhaseResult) writeTable(w io.Writer) error {
	var notFound int64
	for _, o := range p.Ops {
		notFound += o.NotFound
	}
	fmt.Fprintf(w, "%s: %d operations in %.3fs, %.1f ops/s, %d errors",
		p.Phase, p.Operations, p.ElapsedSeconds, p.Throughput, p.Errors)
	if notFound > 0 {
		fmt.Fprintf(w, ", %d not found", notFound)
	}
	if p.Stopped != StoppedCompleted {
		fmt.Fprintf(w, " (stopped: %s)", p.Stopped)
	}
	fmt.Fprintln(w)
	p.Cost.writeLine(w)
	// Numbers align right; names are padded to one width so that they
	// read left-aligned in the right-aligned first column.
	nameWidth := len("OPERATION")
	for _, o := range p.Ops {
		nameWidth = max(nameWidth, len(o.Op))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tCOUNT\tERRORS\tOPS/S\tAVG(ms)\tP50(ms)\tP95(ms)\tP99(ms)\tP99.9(ms)\tMAX(ms)\t\n", nameWidth, "OPERATION")
	for _, o := range p.Ops {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%.1f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n",
			nameWidth, o.Op, o.Count, o.Errors, o.Throughput, o.AvgMs, o.P50Ms, o.P95Ms, o.P99Ms, o.P999Ms, o.MaxMs)
	}
	return tw.Flush()
}

// writeLine writes the cost line of a phase measured with a probe.
func (c Cost) writeLine(w io.Writer) {
	switch {
	case c.Error != "":
		fmt.Fprintf(w, "server cost: not measured (%s)\n", c.Error)
	case c.Nodes > 0:
		f := func(v *float64, format string) string {
			if v == nil {
				return "n/a"
			}
			return fmt.Sprintf(format, *v)
		}
		fmt.Fprintf(w, "server cost per operation, summed over %d nodes: %s µs CPU, %s fsyncs, %s bytes written\n",
			c.Nodes, f(c.ServerCPUMicrosPerOp, "%.1f"), f(c.FsyncsPerOp, "%.3f"), f(c.BytesWrittenPerOp, "%.0f"))
	}
}
