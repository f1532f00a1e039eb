package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tidekv/tidekv/bench/cachebench"
)

// realFig3 is the real-process scale of paper-fig3 with the flags set
// explicitly on top (the others default to the model's scale).
func realFig3(f *pflag.FlagSet, set cachebench.Fig3Config) cachebench.Fig3Config {
	c := cachebench.RealFig3Config()
	for name, apply := range map[string]func(){
		"keys":              func() { c.Keys = set.Keys },
		"value-bytes":       func() { c.ValueBytes = set.ValueBytes },
		"steps":             func() { c.Steps = set.Steps },
		"bucket-steps":      func() { c.BucketSteps = set.BucketSteps },
		"rates":             func() { c.Rates = set.Rates },
		"static-nodes":      func() { c.StaticNodes = set.StaticNodes },
		"capacity-per-node": func() { c.CapacityPerNode = set.CapacityPerNode },
		"node-start-steps":  func() { c.NodeStartSteps = set.NodeStartSteps },
		"max-nodes":         func() { c.MaxNodes = set.MaxNodes },
	} {
		if f.Changed(name) {
			apply()
		}
	}
	c.Seed = set.Seed
	return c
}

// realPrelaunch is the real-process scale of prelaunch with the flags set
// explicitly on top; pre carries --duration and --write-rate.
func realPrelaunch(f *pflag.FlagSet, pre cachebench.PrelaunchConfig, set cachebench.Fig3Config) cachebench.PrelaunchConfig {
	if f.Changed("capacity-per-node") {
		pre.CapacityPerNode = set.CapacityPerNode
	}
	if f.Changed("value-bytes") {
		pre.ValueBytes = set.ValueBytes
	}
	if f.Changed("max-nodes") {
		pre.MaxNodes = set.MaxNodes
	}
	return pre
}

// realCacheDir is where a real run's clusters live: a temporary
// directory the caller removes.
func realCacheDir(ro *cachebench.RealOptions) (func(), error) {
	var err error
	if ro.Binary, err = tidekvBinary(ro.Binary); err != nil {
		return nil, err
	}
	if ro.Dir, err = os.MkdirTemp("", "tidekv-cache-"); err != nil {
		return nil, err
	}
	return func() { os.RemoveAll(ro.Dir) }, nil
}

// realFig3Report is one variant at one rate in `tidekv bench cache
// --scenario paper-fig3 --real --json`: the real run, and the model's
// run of the same variant and config.
type realFig3Report struct {
	Scenario string                 `json:"scenario"`
	NodeCPUs float64                `json:"node_cpus"`
	Real     cachebench.RealFig3Run `json:"real"`
	Model    cachebench.Fig3Run     `json:"model"`
}

func runRealFig3(ctx context.Context, w io.Writer, cfg cachebench.Fig3Config, ro cachebench.RealOptions, out string, asJSON bool) error {
	ro.NodeStart = time.Duration(cfg.NodeStartSteps) * time.Second
	model, err := cachebench.RunFig3(cfg)
	if err != nil {
		return err
	}
	cleanup, err := realCacheDir(&ro)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(ro.Progress, "paper-fig3 on real processes (node CPUs %v): %d keys of %d B, %d s, rates %v, %d KiB a node, static %v, elastic %d to %d nodes\n",
		ro.NodeCPUs, cfg.Keys, cfg.ValueBytes, cfg.Steps, cfg.Rates, cfg.CapacityPerNode>>10, cfg.StaticNodes, cfg.ElasticNodes, cfg.MaxNodes)
	runs, err := cachebench.RunRealFig3(ctx, cfg, ro)
	if err != nil {
		return err
	}
	reports := make([]realFig3Report, len(runs))
	real := make([]cachebench.Fig3Run, len(runs))
	for i, r := range runs {
		reports[i] = realFig3Report{Scenario: "paper-fig3-real", NodeCPUs: ro.NodeCPUs, Real: r, Model: model[i]}
		real[i] = r.Fig3Run
	}
	if out != "" {
		for _, rate := range cfg.Rates {
			if _, err := cachebench.WriteSVG(out, fmt.Sprintf("cache-real-fig3-rate%d", rate), cachebench.RealFig3Chart(cfg, rate, real, model)); err != nil {
				return err
			}
		}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(reports)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "RATE\tVARIANT\tMISS RATE real / model\tLAST %d s real / model\tNODES AT END real / model\tMEAN NODES real / model\tEVICTED real / model\tFAILED\tP99 ms\tMISS RATE PER %d s (real)\n", cfg.BucketSteps, cfg.BucketSteps)
	for _, r := range reports {
		var each []string
		for _, m := range r.Real.MissRate {
			each = append(each, fmt.Sprintf("%.2f", m))
		}
		rl, md := r.Real.Fig3Run, r.Model
		fmt.Fprintf(tw, "%d\t%s\t%.3f / %.3f\t%.3f / %.3f\t%d / %d\t%.1f / %.1f\t%d / %d\t%d\t%.1f\t%s\n", rl.Rate, rl.Variant,
			float64(rl.Misses)/float64(max(rl.Queries, 1)), float64(md.Misses)/float64(md.Queries),
			rl.MissRate[len(rl.MissRate)-1], md.MissRate[len(md.MissRate)-1], rl.Nodes[len(rl.Nodes)-1], md.Nodes[len(md.Nodes)-1],
			float64(rl.NodeSteps)/float64(cfg.Steps), float64(md.NodeSteps)/float64(cfg.Steps), rl.Evicted, md.Evicted, r.Real.Failed, r.Real.P99Ms, strings.Join(each, " "))
	}
	return tw.Flush()
}

func runRealPrelaunch(ctx context.Context, w io.Writer, cfg cachebench.PrelaunchConfig, ro cachebench.RealOptions, out string, asJSON bool) error {
	cleanup, err := realCacheDir(&ro)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(ro.Progress, "prelaunch on real processes (node CPUs %v): %d nodes up to %d, %d KiB a node, %.0f KiB/s of %d-byte values for %v, nodes told to start in %v\n",
		ro.NodeCPUs, cfg.Nodes, cfg.MaxNodes, cfg.CapacityPerNode>>10, cfg.WriteRate/(1<<10), cfg.ValueBytes, cfg.Duration, ro.NodeStart)
	runs, err := cachebench.RunRealPrelaunch(ctx, cfg, ro)
	if err != nil {
		return err
	}
	if out != "" {
		if _, err := cachebench.WriteSVG(out, "cache-real-prelaunch", cachebench.PrelaunchChart(cfg, runs)); err != nil {
			return err
		}
	}
	if asJSON {
		return json.NewEncoder(w).Encode(runs)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIANT\tFULL NODE-SECONDS real / model\tFIRST FULL real / model\tEVICTED KiB real / model\tEVICTED KEYS\tMAX SHARE\tJOINED AT (s) real / model\tNODES real / model\tNODE-SECONDS real / model\tFAILED WRITES\tP99 ms")
	for _, r := range runs {
		m := r.Model
		var joined, mjoined []string
		for _, j := range r.JoinedSeconds {
			joined = append(joined, fmt.Sprintf("%.0f", j))
		}
		for _, j := range m.Joined {
			mjoined = append(mjoined, fmt.Sprintf("%.0f", j.Seconds()))
		}
		mfirst := -1.0
		if m.FirstFull >= 0 {
			mfirst = m.FirstFull.Seconds()
		}
		fmt.Fprintf(tw, "%s\t%.0f / %.0f\t%.0f / %.0f\t%.0f / %.0f\t%d\t%.2f\t%s / %s\t%d / %d\t%.0f / %.0f\t%d of %d\t%.1f\n", r.Variant,
			r.FullNodeSeconds, m.FullNodeSeconds, r.FirstFullSeconds, mfirst, r.EvictedBytes/(1<<10), m.EvictedBytes/(1<<10), r.EvictedKeys,
			r.MaxShare, strings.Join(joined, " "), strings.Join(mjoined, " "), r.Nodes, m.Nodes, r.NodeSeconds, m.NodeSeconds, r.Failed, r.Writes, r.P99Ms)
	}
	return tw.Flush()
}
