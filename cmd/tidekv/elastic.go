package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	elasticbench "github.com/tidekv/tidekv/bench/elastic"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/sim"
)

// elasticReport is one run's result: the script interface of
// `tidekv bench elastic --json` (one object per controller).
type elasticReport struct {
	Scenario         string  `json:"scenario"`
	Controller       string  `json:"controller"`
	Seed             uint64  `json:"seed"`
	ViolationSeconds float64 `json:"violation_seconds"`
	NodeSeconds      float64 `json:"node_seconds"`
	MeanUtilization  float64 `json:"mean_utilization"`
	ScalingActions   int     `json:"scaling_actions"`
	P99Ms            float64 `json:"p99_ms"`
	Timeline         string  `json:"timeline_csv"`
	Plot             string  `json:"plot_svg"`
}

func newElasticBenchCmd() *cobra.Command {
	o := &elasticCmd{real: elasticbench.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "elastic",
		Short: "Compare elasticity controllers under a load curve: SLO violations, node-seconds, utilisation, actions",
		Long: `Runs a load curve (step, spike, diurnal or trace:FILE with "seconds,ops" lines
and an optional "# period: SECONDS" comment) against a cluster run by the
static-at-peak, reactive, proactive or combined controller ("all" runs the
four). With --sim it runs in the deterministic simulator, in seconds, with
the same control code the server runs; without, it starts a cluster of real
processes (3 nodes, autoscaling with the local actuator up to --max-nodes;
static-at-peak starts --max-nodes) and drives it open-loop with a curve in
multiples of --rate, what 3 nodes sustain: three minutes of step or spike,
two periods of diurnal. Writes a timeline (CSV) and a plot (SVG) per run
into --out. --calibrate measures --rate instead: the highest rate fixed
clusters of 3 and of --max-nodes nodes serve with p99 within the SLO.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.scenarioName, "scenario", "step", "load curve: step, spike, diurnal or trace:FILE")
	f.StringVar(&o.controller, "controller", "all", "static, reactive, proactive, combined or all")
	f.BoolVar(&o.simulate, "sim", false, "run in the deterministic simulator")
	f.BoolVar(&o.asJSON, "json", false, "print the results as JSON")
	f.Uint64Var(&o.seed, "seed", 1, "simulator seed (load noise)")
	f.StringVar(&o.out, "out", "elastic-results", "directory for the timelines and plots")
	f.Float64Var(&o.variant.hog, "hog", 0, "share of node 1's capacity a co-located process steals (0..1); real processes: a busy process in a cgroup inside node 1's taking this share of its quota, needs --node-cpus")
	f.BoolVar(&o.variant.plain, "ignore-interference", false, "plan as if every node had its peers' capacity (autoscale.ignore-interference)")
	f.StringVar(&o.real.Binary, "binary", "", "tidekv executable for real-process runs (default: this one)")
	f.IntVar(&o.real.MaxNodes, "max-nodes", o.real.MaxNodes, "real-process runs: the most nodes autoscaling may start")
	f.Float64Var(&o.real.Rate, "rate", o.real.Rate, "real-process runs: what 3 nodes sustain (--calibrate measures it), requests/s; the curves peak at 1.4× it")
	f.DurationVar(&o.real.SLO, "slo", o.real.SLO, "real-process runs: the p99 the controllers keep (autoscale.slo-p99) and --calibrate judges by")
	f.DurationVar(&o.real.Period, "period", o.real.Period, "real-process runs: the diurnal curve's period (two are run), also the forecaster's season")
	f.BoolVar(&o.calibrate, "calibrate", false, "real processes: measure the rate 3 and --max-nodes nodes sustain, starting from --rate/2, instead of running a curve")
	f.Float64Var(&o.real.NodeCPUs, "node-cpus", 0, "real-process runs: each node's CPU size, a cgroup of its own with a quota of this many CPUs (as `tidekv up --node-cpus`), the autoscaler's nodes included; 0: unsized")
	return cmd
}

// elasticCmd is `bench elastic`'s flags.
type elasticCmd struct {
	scenarioName, controller, out string
	simulate, asJSON, calibrate   bool
	seed                          uint64
	real                          elasticbench.Options
	variant                       interference
}

// run runs the calibration, or the curve for each controller asked, and
// prints their table or JSON.
func (o *elasticCmd) run(cmd *cobra.Command) error {
	// Ctrl-C stops the real processes, removes their cgroups and
	// the cluster's directory; without it the nodes die with
	// this process (Pdeathsig) and leave both behind.
	ctx, stop := signal.NotifyContext(cmdContext(cmd), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.variant.hog > 0 && !o.simulate && o.real.NodeCPUs == 0 {
		return errors.New("--hog on real processes needs --node-cpus: the co-runner takes a share of node 1's CPU quota")
	}
	o.real.Hog, o.real.IgnoreInterference = o.variant.hog, o.variant.plain
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if o.calibrate {
		return runElasticCalibration(ctx, o.real, o.out, o.asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	controllers := []string{o.controller}
	if o.controller == "all" {
		controllers = []string{elastic.Static, elastic.Reactive, elastic.Proactive, elastic.Combined}
	}
	var reports []elasticReport
	for _, ctl := range controllers {
		run := func(scenarioName, ctl string, seed uint64, out string) (elasticReport, error) {
			return runElasticSim(scenarioName, ctl, seed, out, o.variant)
		}
		if !o.simulate {
			run = func(scenarioName, ctl string, seed uint64, out string) (elasticReport, error) {
				return runElasticReal(ctx, o.real, scenarioName, ctl, seed, out, cmd.ErrOrStderr())
			}
		}
		r, err := run(o.scenarioName, ctl, o.seed, o.out)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s/%s done: %s\n", o.scenarioName, ctl, r.Plot)
		reports = append(reports, r)
	}
	if o.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		if len(reports) == 1 {
			return enc.Encode(reports[0])
		}
		return enc.Encode(reports)
	}
	return elasticTable(cmd.OutOrStdout(), reports)
}

// tidekvBinary is the executable real-process benchmarks run: binary
// when set, else this one.
func tidekvBinary(binary string) (string, error) {
	if binary != "" {
		return binary, nil
	}
	return os.Executable()
}

// runElasticReal runs one scenario against real processes (a cluster in
// a directory under out, removed afterwards) and writes its files.
func runElasticReal(ctx context.Context, o elasticbench.Options, scenarioName, controller string, seed uint64, out string, progress io.Writer) (elasticReport, error) {
	var err error
	if o.Binary, err = tidekvBinary(o.Binary); err != nil {
		return elasticReport{}, err
	}
	dir, err := os.MkdirTemp(out, "cluster-")
	if err != nil {
		return elasticReport{}, err
	}
	defer os.RemoveAll(dir)
	o.Dir, o.Scenario, o.Controller, o.Seed = dir, scenarioName, controller, seed
	r, err := elasticbench.Run(ctx, o, progress)
	if err != nil {
		return elasticReport{}, err
	}
	for _, d := range r.Decisions {
		fmt.Fprintf(progress, "  %s %s: %s\n", d.At.Format("15:04:05"), d.Action, d.Reason)
	}
	controller = interference{hog: o.Hog, plain: o.IgnoreInterference}.label(controller)
	title := fmt.Sprintf("%s, %s controller (real processes)", scenarioName, controller)
	return writeElastic(scenarioName+"-real", controller, seed, out, title, r.Metrics, r.Timeline, r.SLO)
}

// runElasticCalibration measures what fixed real-process clusters
// sustain (a cluster at a time in a directory under out, removed after).
func runElasticCalibration(ctx context.Context, o elasticbench.Options, out string, asJSON bool, w, progress io.Writer) error {
	var err error
	if o.Binary, err = tidekvBinary(o.Binary); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(out, "calibrate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o.Dir = dir
	c, err := elasticbench.Calibrate(ctx, o, progress)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(w).Encode(c)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NODES\tRATE/s\tSERVED\tFAILED\tP99\tNODE CPU\tGENERATOR CPU\tSUSTAINED (p99 <= %v)\n", c.SLO)
	for _, t := range c.Trials {
		fmt.Fprintf(tw, "%d\t%.0f\t%d\t%d\t%v\t%v\t%.2f\t%v\n", t.Nodes, t.Rate, t.Served, t.Failed, t.P99.Round(100*time.Microsecond), t.CPU, t.GeneratorCPU, t.Sustained)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	a, b := c.Rates[o.Nodes], c.Rates[o.MaxNodes]
	fmt.Fprintf(w, "sustainable: %d nodes %.0f/s, %d nodes %.0f/s (%.2f×)\n", o.Nodes, a, o.MaxNodes, b, b/max(a, 1))
	return nil
}

// interference changes a scenario: a co-runner stealing a share of node
// 1's capacity, and the plain planner that ignores interference.
type interference struct {
	hog   float64
	plain bool
}

// label names controller's runs under the variant: "combined-hog50%-plain".
func (v interference) label(controller string) string {
	if v.hog > 0 || v.plain {
		controller += fmt.Sprintf("-hog%.0f%%", 100*v.hog)
		if v.plain {
			controller += "-plain"
		}
	}
	return controller
}

// runElasticSim runs one scenario in the simulator and writes its files.
func runElasticSim(scenarioName, controller string, seed uint64, out string, v interference) (elasticReport, error) {
	c, err := sim.ElasticScenario(scenarioName, controller, seed)
	if err != nil {
		return elasticReport{}, err
	}
	c.Hog, c.Policy.IgnoreInterference = v.hog, v.plain
	controller = v.label(controller)
	r, err := sim.RunElastic(c)
	if err != nil {
		return elasticReport{}, err
	}
	title := fmt.Sprintf("%s, %s controller (simulated, seed %d)", scenarioName, controller, seed)
	return writeElastic(scenarioName, controller, seed, out, title, r.Metrics, r.Timeline, c.Policy.SLOP99)
}

// writeElastic writes a run's timeline (CSV) and plot (SVG) and reports it.
func writeElastic(scenarioName, controller string, seed uint64, out, title string, m sim.ElasticMetrics, timeline []sim.ElasticPoint, slo time.Duration) (elasticReport, error) {
	name := filepath.Base(scenarioName)
	name = strings.TrimSuffix(strings.ReplaceAll(name, ":", "-"), filepath.Ext(name))
	base := filepath.Join(out, fmt.Sprintf("%s-%s", name, controller))
	rep := elasticReport{Scenario: scenarioName, Controller: controller, Seed: seed,
		ViolationSeconds: m.ViolationSeconds, NodeSeconds: m.NodeSeconds, MeanUtilization: m.MeanUtilization,
		ScalingActions: m.ScalingActions, P99Ms: float64(m.P99.Microseconds()) / 1000,
		Timeline: base + ".csv", Plot: base + ".svg"}
	if err := writeFile(rep.Timeline, func(w io.Writer) error { return sim.WriteElasticCSV(w, timeline) }); err != nil {
		return rep, err
	}
	err := writeFile(rep.Plot, func(w io.Writer) error { return sim.ElasticChart(title, timeline, slo).WriteSVG(w) })
	return rep, err
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func elasticTable(w io.Writer, reports []elasticReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tCONTROLLER\tVIOLATION(s)\tNODE-SECONDS\tUTILISATION\tACTIONS\tP99\tPLOT")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.2f\t%d\t%v\t%s\n", r.Scenario, r.Controller, r.ViolationSeconds, r.NodeSeconds,
			r.MeanUtilization, r.ScalingActions, time.Duration(r.P99Ms*float64(time.Millisecond)).Round(100*time.Microsecond), r.Plot)
	}
	return tw.Flush()
}
