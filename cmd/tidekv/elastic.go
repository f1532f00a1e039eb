package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
	var scenarioName, controller, out string
	var simulate, asJSON bool
	var seed uint64
	cmd := &cobra.Command{
		Use:   "elastic",
		Short: "Compare elasticity controllers under a load curve: SLO violations, node-seconds, utilisation, actions",
		Long: `Runs a load curve (step, spike, diurnal or trace:FILE with "seconds,ops" lines
and an optional "# period: SECONDS" comment) against a cluster run by the
static-at-peak, reactive, proactive or combined controller ("all" runs the
four). With --sim it runs in the deterministic simulator, in seconds, with
the same control code the server runs. Writes a timeline (CSV) and a plot
(SVG) per run into --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !simulate {
				return errors.New("bench elastic: only --sim runs are built so far; for real processes run tidekv up --autoscale and drive it with tidekv bench (docs/elasticity.md)")
			}
			controllers := []string{controller}
			if controller == "all" {
				controllers = []string{elastic.Static, elastic.Reactive, elastic.Proactive, elastic.Combined}
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			var reports []elasticReport
			for _, ctl := range controllers {
				r, err := runElasticSim(scenarioName, ctl, seed, out)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s/%s done: %s\n", scenarioName, ctl, r.Plot)
				reports = append(reports, r)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				if len(reports) == 1 {
					return enc.Encode(reports[0])
				}
				return enc.Encode(reports)
			}
			return elasticTable(cmd.OutOrStdout(), reports)
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarioName, "scenario", "step", "load curve: step, spike, diurnal or trace:FILE")
	f.StringVar(&controller, "controller", "all", "static, reactive, proactive, combined or all")
	f.BoolVar(&simulate, "sim", false, "run in the deterministic simulator")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.Uint64Var(&seed, "seed", 1, "simulator seed (load noise)")
	f.StringVar(&out, "out", "elastic-results", "directory for the timelines and plots")
	return cmd
}

// runElasticSim runs one scenario in the simulator and writes its files.
func runElasticSim(scenarioName, controller string, seed uint64, out string) (elasticReport, error) {
	c, err := sim.ElasticScenario(scenarioName, controller, seed)
	if err != nil {
		return elasticReport{}, err
	}
	r, err := sim.RunElastic(c)
	if err != nil {
		return elasticReport{}, err
	}
	base := filepath.Join(out, fmt.Sprintf("%s-%s", strings.ReplaceAll(filepath.Base(scenarioName), ":", "-"), controller))
	rep := elasticReport{Scenario: scenarioName, Controller: controller, Seed: seed,
		ViolationSeconds: r.Metrics.ViolationSeconds, NodeSeconds: r.Metrics.NodeSeconds, MeanUtilization: r.Metrics.MeanUtilization,
		ScalingActions: r.Metrics.ScalingActions, P99Ms: float64(r.Metrics.P99.Microseconds()) / 1000,
		Timeline: base + ".csv", Plot: base + ".svg"}
	if err := writeFile(rep.Timeline, func(w io.Writer) error { return sim.WriteElasticCSV(w, r.Timeline) }); err != nil {
		return rep, err
	}
	title := fmt.Sprintf("%s, %s controller (simulated, seed %d)", scenarioName, controller, seed)
	err = writeFile(rep.Plot, func(w io.Writer) error { return sim.ElasticChart(title, r.Timeline, c.Policy.SLOP99).WriteSVG(w) })
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
