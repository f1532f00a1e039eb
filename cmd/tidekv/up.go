package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/internal/launcher"
)

func newUpCmd() *cobra.Command {
	cfg := launcher.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a local cluster of tidekv server processes in the foreground",
		Long: `Starts --nodes tidekv server processes on 127.0.0.1, node i with data in
<data-dir>/node<i> (its log in <data-dir>/node<i>/tidekv.log) and ports
base-port+10*(i-1) (gRPC) and +1 (HTTP). Prints "node <i> grpc=... http=..."
as each node serves, then "cluster up: ..." once the meta range and every
range have their replication factor (GET /ready answers 200), so that any
one node can then fail without a range losing its quorum. Ctrl-C stops
every node cleanly. Running it again on the same data dir restarts the same
cluster with its data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("finding the tidekv binary (use --binary): %w", err)
				}
				cfg.Binary = exe
			}
			ctx, stop := signal.NotifyContext(cmdContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				// After the first signal, restore the default action so a
				// second Ctrl-C ends `up` at once; on Linux the servers
				// are then sent SIGTERM as their parent dies.
				<-ctx.Done()
				stop()
			}()
			return launcher.Up(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "number of server processes")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "parent data directory; node i uses <data-dir>/node<i>")
	f.IntVar(&cfg.BasePort, "base-port", cfg.BasePort, "gRPC port of node 1; node i uses base-port+10*(i-1) and the next 9 ports")
	f.StringVar(&cfg.Binary, "binary", "", "tidekv executable to run (default: this executable)")
	return cmd
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
