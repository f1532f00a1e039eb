package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tidekv/tidekv/bench"
	"github.com/tidekv/tidekv/bench/scenario"
	"github.com/tidekv/tidekv/client"
)

func newBenchCmd() *cobra.Command {
	cfg := bench.DefaultConfig()
	var addrs string
	var gcPercent *int
	var asJSON, unary bool
	var figures string
	var read client.ReadOption
	var sec clientSecurity
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a YCSB core workload (a-f) against a TideKV cluster",
		Long: `Run a YCSB core workload against a TideKV cluster: load --records records,
then run --ops operations over --threads concurrent clients.

  a  50% read, 50% update              d  95% read, 5% insert (latest)
  b  95% read, 5% update               e  95% scan, 5% insert
  c  100% read                         f  50% read, 50% read-modify-write

--read sets the read mode of every read and scan, including the read of a
read-modify-write (as YCSB's bindings apply their read consistency level).

Each phase also reports the servers' cost per operation, summed over every
node in the cluster's node list: CPU µs, fsyncs and bytes written, from the
deltas of the nodes' /metrics counters across the phase. Work the cluster
does for other clients in that time counts too.

Progress goes to stderr; the report (a table, or JSON with --json, which
includes each phase's per-second timeline) to stdout. Throughput and p99 per
second are drawn as one SVG per phase into --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runYCSBBench(cmd, cfg, ycsbBenchOut{addrs: addrs, figures: figures, asJSON: asJSON, unary: unary,
				gcPercent: *gcPercent, read: read}, &sec)
		},
	}
	f := cmd.Flags()
	gcPercent = gcPercentFlag(f)
	addAddrFlag(f, &addrs)
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "YCSB core workload: a, b, c, d, e or f")
	f.Int64Var(&cfg.RecordCount, "records", cfg.RecordCount, "records to load, and the key space of the run")
	f.Int64Var(&cfg.OperationCount, "ops", cfg.OperationCount, "run-phase operations (0 = until --duration)")
	f.IntVar(&cfg.Threads, "threads", cfg.Threads, "concurrent clients in the run phase")
	f.IntVar(&cfg.LoadThreads, "load-threads", 0, "concurrent clients in the load phase (0 = --threads)")
	f.StringVar(&cfg.Distribution, "distribution", "", "key distribution: zipfian, uniform, latest or hotspot (default: the workload's)")
	f.Uint64Var(&cfg.Seed, "seed", 0, "random seed (0 = time-based; the report shows the seed used)")
	f.DurationVar(&cfg.Duration, "duration", 0, "cap on the run phase's wall time (0 = none)")
	f.BoolVar(&cfg.SkipLoad, "skip-load", false, "skip the load phase (records were loaded by an earlier run)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.StringVar(&figures, "out", "bench-results", "directory for the per-phase figures (SVG: ycsb-WORKLOAD-PHASE.svg); empty: none")
	f.Var(&read, "read", readFlagUsage)
	f.BoolVar(&unary, "unary", false, "send each request as its own gRPC call instead of on one Batch stream per node (docs/batch-rpc.md), to compare the two")
	sec.addFlags(f)
	cmd.AddCommand(newScenarioCmd(), newElasticBenchCmd(), newChaosBenchCmd(), newTxnBenchCmd(), newCacheBenchCmd())
	return cmd
}

// ycsbBenchOut is what bench's flags say beside cfg: where to connect and
// how to run and report.
type ycsbBenchOut struct {
	addrs, figures string
	asJSON, unary  bool
	gcPercent      int
	read           client.ReadOption
}

// runYCSBBench runs cfg's workload against the cluster at o.addrs and
// prints the report.
func runYCSBBench(cmd *cobra.Command, cfg bench.Config, o ycsbBenchOut, sec *clientSecurity) error {
	if o.read != client.Linearizable() {
		cfg.ReadMode = o.read.String() // recorded in the report
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	applyGCPercent(o.gcPercent)
	ccfg := client.DefaultConfig()
	if ccfg.UnaryRPC = o.unary; o.unary {
		cfg.Transport = "unary"
	}
	// Ctrl-C stops the benchmark and still prints what ran.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// In the benchmark's read mode, so that the replica choice has load
	// scores by the time the run starts.
	c, err := dialBench(ctx, o.addrs, sec, &ccfg, o.read)
	if err != nil {
		return err
	}
	defer c.Close()
	probe, err := costProbe(ctx, c, ccfg.TLS)
	if err != nil {
		return err
	}
	res, runErr := bench.RunWithCost(ctx, cfg, clientStore{c: c, read: o.read}, os.Stderr, probe)
	if res == nil {
		return runErr
	}
	out := cmd.OutOrStdout()
	if o.asJSON {
		err = res.WriteJSON(out)
	} else {
		err = res.WriteTable(out)
	}
	if o.figures != "" {
		paths, ferr := res.WriteFigures(o.figures)
		for _, p := range paths {
			fmt.Fprintf(cmd.ErrOrStderr(), "figure: %s\n", p)
		}
		err = errors.Join(err, ferr)
	}
	if runErr != nil {
		// 130 is the shell's code for death by SIGINT.
		return &exitCodeError{code: 130, err: fmt.Errorf("bench interrupted: %w", runErr)}
	}
	return err
}

// dialBench connects to the cluster at addrs with ccfg and sec's TLS and
// credentials, and reads one key with read so that an unreachable cluster
// fails fast instead of every operation retrying until its own timeout.
func dialBench(ctx context.Context, addrs string, sec *clientSecurity, ccfg *client.Config, read client.ReadOption) (*client.Client, error) {
	if ccfg.Addrs = splitAddrs(addrs); len(ccfg.Addrs) == 0 {
		return nil, errors.New("bench: --addr is empty")
	}
	if err := sec.apply(ccfg); err != nil {
		return nil, err
	}
	c, err := client.New(*ccfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err = c.Get(pctx, []byte("user"), read); err != nil && !errors.Is(err, client.ErrNotFound) {
		c.Close()
		return nil, fmt.Errorf("bench: cluster at %s not reachable: %w", addrs, err)
	}
	return c, nil
}

// addAddrFlag is the --addr flag of the benchmarks that drive a running
// cluster.
func addAddrFlag(f *pflag.FlagSet, addrs *string) {
	f.StringVar(addrs, "addr", "127.0.0.1:7400", "comma-separated `host:port` list of cluster nodes")
}

// costProbe samples the metrics of every node in the cluster's node list,
// so that the cost per operation sums over all of them.
func costProbe(ctx context.Context, c *client.Client, tc *tls.Config) (bench.Probe, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: list the cluster's nodes: %w", err)
	}
	var addrs []string
	for _, n := range st.GetNodes() {
		a := n.GetNode().GetHttpAddr()
		if a == "" {
			return nil, fmt.Errorf("bench: node %d has no HTTP address to read its metrics from", n.GetNode().GetNodeId())
		}
		addrs = append(addrs, a)
	}
	return bench.HTTPProbe(addrs, tc), nil
}

func splitAddrs(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// clientStore adapts the Go client to bench.Store; reads and scans use read.
type clientStore struct {
	c    *client.Client
	read client.ReadOption
}

func (s clientStore) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	v, err := s.c.Get(ctx, key, s.read)
	if errors.Is(err, client.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

func (s clientStore) Put(ctx context.Context, key, value []byte) error {
	return s.c.Put(ctx, key, value)
}

func (s clientStore) Scan(ctx context.Context, start []byte, limit int) (int, error) {
	kvs, err := s.c.Scan(ctx, start, nil, limit, s.read)
	return len(kvs), err
}

func newScenarioCmd() *cobra.Command {
	var opts scenario.Options
	var list bool
	cmd := &cobra.Command{
		Use:   "scenario NAME",
		Short: "Run a scenario benchmark (its own clusters, load and faults); --list names them",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if list || len(args) == 0 {
				for _, s := range scenario.All() {
					fmt.Fprintf(cmd.OutOrStdout(), "%-16s %s\n", s.Name, s.Short)
				}
				return nil
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Progress = cmd.ErrOrStderr()
			return scenario.Run(ctx, args[0], opts, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&list, "list", false, "list the scenarios")
	f.StringVar(&opts.Binary, "binary", "", "tidekv binary for scenarios that start processes (default: this one)")
	f.StringVar(&opts.Dir, "dir", "", "data and log directory (default: a temporary one)")
	f.DurationVar(&opts.Duration, "duration", 0, "length of each measured step (default: the scenario's)")
	f.BoolVar(&opts.Quick, "quick", false, "a small, fast version (smoke test)")
	f.StringVar(&opts.Out, "out", "scenario-results", "directory for the figures (SVG), named SCENARIO-FIGURE.svg and linked from the report")
	f.Uint64Var(&opts.Seed, "seed", 1, "workload seed")
	f.Int64Var(&opts.Records, "records", 0, "records to load instead of the scenario's own count (scenarios that load a data set: partitioning); 0: the scenario's")
	f.Float64Var(&opts.NodeCPUs, "node-cpus", 0, "run each node process the scenario starts in a cgroup of its own with a quota of this many CPUs (as `tidekv up --node-cpus`); 0: unsized")
	f.BoolVar(&opts.JSON, "json", false, "report as JSON instead of markdown (scenarios that support it: geotxn)")
	return cmd
}
