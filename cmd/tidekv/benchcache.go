package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/sim"
)

// cacheReport is one run of a cache scenario: the script interface of
// `tidekv bench cache --json` (one object per variant).
type cacheReport struct {
	Scenario string `json:"scenario"`
	// Variant is "prelaunch" (T by the seed paper's rule) or "fixed-0.95"
	// (a node is asked for when one holds 95% of its capacity).
	Variant string `json:"variant"`
	Seed    uint64 `json:"seed"`
	// FullNodeSeconds: seconds nodes sat at capacity, summed over nodes
	// (requests to them waited for a node or found their key evicted);
	// FirstFullSeconds is when a node first did (−1: never).
	FullNodeSeconds  float64   `json:"full_node_seconds"`
	FirstFullSeconds float64   `json:"first_full_seconds"`
	EvictedBytes     float64   `json:"evicted_bytes"`
	JoinedSeconds    []float64 `json:"joined_seconds"`
	Nodes            int       `json:"nodes"`
	NodeSeconds      float64   `json:"node_seconds"`
	DurationSeconds  float64   `json:"duration_seconds"`
}

func newCacheBenchCmd() *cobra.Command {
	var scenarioName string
	var asJSON bool
	var seed uint64
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Cache key space scenarios in the simulator (prelaunch: idle time during scale-out with and without pre-launch)",
		Long: `Runs a cache key space scenario in the deterministic simulator, with the
control code the server runs. prelaunch: a key space created with
--on-full grow, 512 MiB per node on 2 nodes, written at 2 MiB/s, nodes that
take a minute to start, 15 minutes; once with the pre-launch threshold
(docs/keyspaces.md) and once with T fixed at 95% of the capacity. Prints,
for each, how long nodes sat at capacity (the seed paper's idle time during
scale-out), what they evicted and when new nodes joined.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scenarioName != "prelaunch" {
				return fmt.Errorf("bench cache: unknown scenario %q (built: prelaunch)", scenarioName)
			}
			var reports []cacheReport
			for _, pre := range []bool{true, false} {
				c := sim.PrelaunchScenario(pre, seed)
				r, err := sim.RunCache(c)
				if err != nil {
					return err
				}
				reports = append(reports, cacheReportOf(scenarioName, c, r.Metrics))
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(reports)
			}
			return cacheTable(cmd.OutOrStdout(), reports)
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarioName, "scenario", "prelaunch", "scenario: prelaunch")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.Uint64Var(&seed, "seed", 1, "simulator seed")
	return cmd
}

func cacheReportOf(scenario string, c sim.CacheConfig, m sim.CacheMetrics) cacheReport {
	r := cacheReport{Scenario: scenario, Variant: "fixed-0.95", Seed: c.Seed, FullNodeSeconds: m.FullNodeSeconds,
		FirstFullSeconds: -1, EvictedBytes: m.EvictedBytes, JoinedSeconds: []float64{}, Nodes: m.Nodes, NodeSeconds: m.NodeSeconds, DurationSeconds: c.Duration.Seconds()}
	if c.PreLaunch {
		r.Variant = "prelaunch"
	}
	if m.FirstFull >= 0 {
		r.FirstFullSeconds = m.FirstFull.Seconds()
	}
	for _, j := range m.Joined {
		r.JoinedSeconds = append(r.JoinedSeconds, j.Seconds())
	}
	return r
}

func cacheTable(w io.Writer, reports []cacheReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tVARIANT\tFULL NODE-SECONDS\tFIRST FULL\tEVICTED MiB\tJOINED AT\tNODES\tNODE-SECONDS")
	for _, r := range reports {
		first := "never"
		if r.FirstFullSeconds >= 0 {
			first = secs(r.FirstFullSeconds)
		}
		joined := ""
		for i, j := range r.JoinedSeconds {
			if i > 0 {
				joined += " "
			}
			joined += secs(j)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%.1f\t%s\t%d\t%.0f\n", r.Scenario, r.Variant, r.FullNodeSeconds, first, r.EvictedBytes/(1<<20), joined, r.Nodes, r.NodeSeconds)
	}
	return tw.Flush()
}

func secs(s float64) string { return (time.Duration(s) * time.Second).String() }
