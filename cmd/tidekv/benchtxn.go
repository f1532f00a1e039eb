package main

import (
	"context"
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
		Short: "Run transactions against a TideKV cluster while checking their invariant (--workload bank)",
		Long: `Run a transaction workload against a running cluster and check its invariant
while it runs and at the end (docs/transactions.md).

bank: splits the accounts' keys (bench-bank/00000000...) into --ranges ranges
at evenly spaced accounts, writes --accounts accounts holding --initial-balance
each, then --workers workers transfer 1 to 10 between two random accounts in
one transaction each (Client.Txn, which retries conflicts) for --duration.
Every --check-interval, and once more at the end, every account is read at one
timestamp and their total must be accounts × initial balance. A broken total
stops the run. tpcc-lite is not built yet.

Progress goes to stderr; the report (a table, or JSON with --json) to stdout,
and a figure of transactions/s and p99 per second (SVG) into --out. Exits
non-zero, after the report, when the invariant is broken or the end could not
be checked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ccfg := client.DefaultConfig()
			c, err := dialBench(ctx, addrs, &sec, &ccfg, client.Linearizable())
			if err != nil {
				return err
			}
			defer c.Close()
			res, runErr := bench.RunTxn(ctx, cfg, txnStore{c: c}, cmd.ErrOrStderr())
			if res == nil {
				return runErr
			}
			if asJSON {
				err = res.WriteJSON(cmd.OutOrStdout())
			} else {
				err = res.WriteTable(cmd.OutOrStdout())
			}
			if figures != "" {
				path, ferr := res.WriteFigure(figures)
				if ferr == nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "figure: %s\n", path)
				}
				err = errors.Join(err, ferr)
			}
			switch {
			case !res.InvariantOK:
				return errors.Join(fmt.Errorf("bench txn: %s", res.InvariantError), err)
			case runErr != nil:
				return &exitCodeError{code: 130, err: fmt.Errorf("bench txn interrupted: %w", runErr)}
			}
			return err
		},
	}
	f := cmd.Flags()
	addAddrFlag(f, &addrs)
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "bank (tpcc-lite is not built yet)")
	f.IntVar(&cfg.Accounts, "accounts", cfg.Accounts, "accounts to load and transfer between (at least 2; few accounts, many conflicts)")
	f.Int64Var(&cfg.InitialBalance, "initial-balance", cfg.InitialBalance, "each account's opening balance")
	f.IntVar(&cfg.Ranges, "ranges", cfg.Ranges, "ranges the accounts are split into, so that transfers cross ranges")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent workers, each running one transaction at a time")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the transfers run")
	f.Int64Var(&cfg.Transfers, "transfers", 0, "stop after this many transfers if --duration has not ended the run first (0: no bound)")
	f.DurationVar(&cfg.CheckInterval, "check-interval", cfg.CheckInterval, "time between two checks of the invariant while the transfers run")
	f.Uint64Var(&cfg.Seed, "seed", 0, "random seed (0 = time-based; the report shows the seed used)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.StringVar(&figures, "out", "bench-results", "directory for the figure (SVG: txn-WORKLOAD.svg); empty: none")
	sec.addFlags(f)
	return cmd
}

// txnStore adapts the Go client to bench.TxnStore.
type txnStore struct{ c *client.Client }

func (s txnStore) Txn(ctx context.Context, fn func(tx bench.TxnOps) error) error {
	err := s.c.Txn(ctx, func(tx *client.Tx) error { return fn(tx) })
	if errors.Is(err, client.ErrTxnRetry) {
		return fmt.Errorf("%w: %w", bench.ErrTxnConflict, err)
	}
	return err
}

func (s txnStore) Put(ctx context.Context, key, value []byte) error { return s.c.Put(ctx, key, value) }

func (s txnStore) SnapshotScan(ctx context.Context, start, end []byte) ([]bench.KeyValue, string, error) {
	kvs, at, err := s.c.SnapshotScan(ctx, start, end, 0)
	out := make([]bench.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = bench.KeyValue{Key: kv.Key, Value: kv.Value}
	}
	return out, at.String(), err
}

// Split leaves a key that already starts a range alone (a run before this
// one split there): the server refuses to split there again.
func (s txnStore) Split(ctx context.Context, key []byte) error {
	resp, err := s.c.Ranges(ctx)
	if err != nil {
		return err
	}
	for _, r := range resp.GetRanges() {
		if string(r.GetDesc().GetStartKey()) == string(key) {
			return nil
		}
	}
	_, err = s.c.Split(ctx, key)
	return err
}
