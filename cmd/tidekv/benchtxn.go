package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/bench"
	"github.com/tidekv/tidekv/client"
)

func newTxnBenchCmd() *cobra.Command {
	cfg := bench.DefaultTxnBenchConfig()
	var addrs, figures string
	var asJSON bool
	var sec clientSecurity
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Run transactions against a TideKV cluster while checking their invariants (bank, tpcc-lite)",
		Long: `Run a transaction workload against a running cluster and check its invariants
while it runs and at the end (docs/transactions.md). --workers workers run one
transaction at a time each (Client.Txn, which retries conflicts) for --duration;
every --check-interval, and once more at the end, the workload's keys are read at
one timestamp and checked. A broken invariant stops the run.

bank: splits the accounts' keys (bench-bank/00000000...) into --ranges ranges
at evenly spaced accounts and writes --accounts accounts holding
--initial-balance each; a transaction transfers 1 to 10 between two random
accounts. Their total must never change.

tpcc-lite: TPC-C's New-Order and Payment, half each, over --warehouses
warehouses of 10 districts, 30 customers per district and stock of 1,000 items
(bench-tpcc/..., split into --ranges ranges at evenly spaced districts; the
orders of an earlier run are deleted first). Checked: W_YTD = sum of D_YTD;
each district's D_NEXT_O_ID - 1 = its order count = its last order number;
the customers' payments and the orders' stock match the warehouse's.

Progress goes to stderr; the report (a table, or JSON with --json) to stdout,
and a figure of transactions/s and p99 per second (SVG) into --out. Exits
non-zero, after the report, when the invariant is broken or the end could not
be checked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTxnBench(cmd, cfg, txnBenchOut{addrs: addrs, figures: figures, asJSON: asJSON}, &sec)
		},
	}
	f := cmd.Flags()
	addAddrFlag(f, &addrs)
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "bank or tpcc-lite")
	f.IntVar(&cfg.Accounts, "accounts", cfg.Accounts, "accounts to load and transfer between (at least 2; few accounts, many conflicts)")
	f.Int64Var(&cfg.InitialBalance, "initial-balance", cfg.InitialBalance, "each account's opening balance")
	f.IntVar(&cfg.Warehouses, "warehouses", cfg.Warehouses, "tpcc-lite: warehouses to load (few warehouses, many conflicts on each one's W_YTD)")
	f.IntVar(&cfg.Ranges, "ranges", cfg.Ranges, "ranges the accounts or districts are split into, so that transactions cross ranges")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent workers, each running one transaction at a time")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the transactions run")
	f.Int64Var(&cfg.Transactions, "transactions", 0, "stop after this many transactions if --duration has not ended the run first (0: no bound)")
	f.DurationVar(&cfg.CheckInterval, "check-interval", cfg.CheckInterval, "time between two checks of the invariants while the transactions run")
	f.Uint64Var(&cfg.Seed, "seed", 0, "random seed (0 = time-based; the report shows the seed used)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.StringVar(&figures, "out", "bench-results", "directory for the figure (SVG: txn-WORKLOAD.svg); empty: none")
	sec.addFlags(f)
	return cmd
}

// txnBenchOut are the flags of bench txn that are not the benchmark's.
type txnBenchOut struct {
	addrs, figures string
	asJSON         bool
}

// runTxnBench runs the benchmark and prints its report; it fails, after
// the report, when the invariant did not hold or could not be checked.
func runTxnBench(cmd *cobra.Command, cfg bench.TxnBenchConfig, o txnBenchOut, sec *clientSecurity) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ccfg := client.DefaultConfig()
	c, err := dialBench(ctx, o.addrs, sec, &ccfg, client.Linearizable())
	if err != nil {
		return err
	}
	defer c.Close()
	res, runErr := bench.RunTxn(ctx, cfg, bench.ClientTxnStore(c), cmd.ErrOrStderr())
	if res == nil {
		return runErr
	}
	if o.asJSON {
		err = res.WriteJSON(cmd.OutOrStdout())
	} else {
		err = res.WriteTable(cmd.OutOrStdout())
	}
	if o.figures != "" {
		path, ferr := res.WriteFigure(o.figures)
		if ferr == nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "figure: %s\n", path)
		}
		err = errors.Join(err, ferr)
	}
	switch {
	case !res.InvariantOK:
		return errors.Join(fmt.Errorf("bench txn: %s", res.InvariantError), err)
	case runErr != nil:
		// 130 is the shell's code for death by SIGINT.
		return &exitCodeError{code: 130, err: fmt.Errorf("bench txn interrupted: %w", runErr)}
	}
	return err
}
