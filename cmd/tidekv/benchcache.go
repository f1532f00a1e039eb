package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/bench/cachebench"
	"github.com/tidekv/tidekv/sim"
)

// cacheReport is one run of a cache scenario: the script interface of
// `tidekv bench cache --json` (one object per variant).
type cacheReport struct {
	Scenario string `json:"scenario"`
	// Variant is "prelaunch" (T by the seed paper's rule) or "fixed-S"
	// (T fixed at the share S nodes shed at, 0.9 by default: a node is
	// asked for only when one is nearly full).
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
	var scenarioName, out string
	var asJSON, real bool
	var seed uint64
	mig, fig3 := cachebench.DefaultMigrationConfig(), cachebench.DefaultFig3Config()
	keys, valueBytes := mig.Keys, mig.ValueBytes
	pre, ro := cachebench.RealPrelaunchConfig(), cachebench.DefaultRealOptions()
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "The elastic cache paper's experiments in miniature (paper-fig3, migration, prelaunch)",
		Long: `Runs one of the seed paper's cache experiments with TideKV's own code.

paper-fig3: miss rate over time of static caches of 2, 4 and 8 nodes that
evict the least recently used keys against a key space that grows (on_full
grow), at two query rates over --keys distinct keys, in a key-level model
of virtual time steps (internal/cache decides evictions, internal/elastic
growth). migration: the memory engine's five indexes (B+-tree, extendible
hashing with 100/300/500 records a bucket, counting Bloom filter) each
hold --keys keys on one node; --migrations times, the largest span's lower
half moves to a new node; prints the time of each move. prelaunch: idle
time during scale-out with and without pre-launch, in the simulator (a key
space created with --on-full grow, 512 MiB per node on 2 nodes, written at
2 MiB/s, nodes that take a minute to start, 15 minutes).

With --real, paper-fig3 and prelaunch run on real processes instead, a
cluster per variant started here (--node-cpus sizes each node, those the
local actuator adds included), at a scale this machine runs in about 10
minutes per rate (paper-fig3) and 6 minutes (prelaunch); flags set
explicitly override that scale. paper-fig3 then reads through to an origin
in this process; the model's run of the same config is drawn beside it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			mig.Keys, mig.ValueBytes = keys, valueBytes
			fig3.Keys, fig3.ValueBytes, fig3.Seed = keys, valueBytes, seed
			if real {
				ctx, stop := signal.NotifyContext(cmdContext(cmd), os.Interrupt, syscall.SIGTERM)
				defer stop()
				ro.Progress = cmd.ErrOrStderr()
				if cmd.Flags().Changed("node-start-steps") {
					ro.NodeStart = time.Duration(fig3.NodeStartSteps) * time.Second
				}
				switch scenarioName {
				case "prelaunch":
					return runRealPrelaunch(ctx, w, realPrelaunch(cmd.Flags(), pre, fig3), ro, out, asJSON)
				case "paper-fig3":
					return runRealFig3(ctx, w, realFig3(cmd.Flags(), fig3), ro, out, asJSON)
				}
				return fmt.Errorf("bench cache: --real runs paper-fig3 and prelaunch, not %q", scenarioName)
			}
			switch scenarioName {
			case "prelaunch":
				return runPrelaunch(w, seed, asJSON)
			case "migration":
				return runMigration(w, mig, out, asJSON)
			case "paper-fig3":
				return runFig3(w, fig3, out, asJSON)
			}
			return fmt.Errorf("bench cache: unknown scenario %q (want paper-fig3, migration or prelaunch)", scenarioName)
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarioName, "scenario", "prelaunch", "scenario: paper-fig3, migration or prelaunch")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.Uint64Var(&seed, "seed", 1, "seed of the simulator (prelaunch) or of the query stream (paper-fig3)")
	f.StringVar(&out, "out", "", "directory for the figures (SVG: cache-migration.svg, cache-fig3-rateN.svg); empty: none")
	f.IntVar(&keys, "keys", keys, "distinct keys (paper-fig3, migration)")
	f.IntVar(&valueBytes, "value-bytes", valueBytes, "bytes per value (paper-fig3, migration, --real prelaunch)")
	f.IntVar(&mig.Migrations, "migrations", mig.Migrations, "migration: moves, each to one more node")
	f.IntVar(&mig.Rounds, "rounds", mig.Rounds, "migration: runs per index; each move reports its fastest")
	f.IntVar(&fig3.Steps, "steps", fig3.Steps, "paper-fig3: time steps")
	f.IntVar(&fig3.BucketSteps, "bucket-steps", fig3.BucketSteps, "paper-fig3: steps per reported miss rate")
	f.IntSliceVar(&fig3.Rates, "rates", fig3.Rates, "paper-fig3: query rates compared (queries per step)")
	f.IntSliceVar(&fig3.StaticNodes, "static-nodes", fig3.StaticNodes, "paper-fig3: sizes of the static caches")
	f.Uint64Var(&fig3.CapacityPerNode, "capacity-per-node", fig3.CapacityPerNode, "paper-fig3, --real prelaunch: bytes of the key space a node holds")
	f.IntVar(&fig3.NodeStartSteps, "node-start-steps", fig3.NodeStartSteps, "paper-fig3: steps a new node takes to join (with --real: seconds, told to the controller as autoscale.node-start-time)")
	f.IntVar(&fig3.MaxNodes, "max-nodes", fig3.MaxNodes, "paper-fig3, --real prelaunch: the most nodes the growing cache may have")
	f.BoolVar(&real, "real", false, "paper-fig3, prelaunch: run on real processes (a cluster per variant) at a scale this machine runs, beside the model")
	f.StringVar(&ro.Binary, "binary", "", "--real: tidekv executable (default: this one)")
	f.Float64Var(&ro.NodeCPUs, "node-cpus", 0, "--real: each node's CPU size, a cgroup of its own with a quota of this many CPUs (as `tidekv up --node-cpus`), the nodes the local actuator adds included; 0: unsized")
	f.DurationVar(&pre.Duration, "duration", pre.Duration, "--real prelaunch: how long the key space is written")
	f.Float64Var(&pre.WriteRate, "write-rate", pre.WriteRate, "--real prelaunch: bytes a second written to the key space")
	return cmd
}

func runPrelaunch(w io.Writer, seed uint64, asJSON bool) error {
	var reports []cacheReport
	for _, pre := range []bool{true, false} {
		c := sim.PrelaunchScenario(pre, seed)
		r, err := sim.RunCache(c)
		if err != nil {
			return err
		}
		reports = append(reports, cacheReportOf("prelaunch", c, r.Metrics))
	}
	if asJSON {
		return json.NewEncoder(w).Encode(reports)
	}
	return cacheTable(w, reports)
}

func cacheReportOf(scenario string, c sim.CacheConfig, m sim.CacheMetrics) cacheReport {
	r := cacheReport{Scenario: scenario, Variant: fmt.Sprintf("fixed-%g", c.Policy.Overflow.ShedAt), Seed: c.Seed, FullNodeSeconds: m.FullNodeSeconds,
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
