package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/internal/actuator/local"
	"github.com/tidekv/tidekv/internal/launcher"
)

func newUpCmd() *cobra.Command {
	cfg := launcher.DefaultConfig()
	var autoscale bool
	var maxNodes int
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a local cluster of tidekv server processes in the foreground",
		Long: `Starts --nodes tidekv server processes on 127.0.0.1, node i with data in
<data-dir>/node<i> (its log in <data-dir>/node<i>/tidekv.log) and ports
base-port+10*(i-1) (gRPC) and +1 (HTTP). Prints "node <i> grpc=... http=..."
as each node serves, then "cluster up: ..." once the meta range and every
range have their replication factor (GET /ready answers 200), so that any
one node can then fail without a range losing its quorum. With
--node-cpus F each node runs in a cgroup of its own limited to F CPUs
(the node line then ends "cpus=F"). Ctrl-C stops
every node cleanly. Running it again on the same data dir restarts the same
cluster with its data. The nodes run insecure (plaintext, no authentication)
on 127.0.0.1; docs/security.md starts a secure cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("finding the tidekv binary (use --binary): %w", err)
				}
				cfg.Binary = exe
			}
			if autoscale {
				cfg.ExtraArgs = append(cfg.ExtraArgs, launcher.AutoscaleArgs(maxNodes, cfg.NodeCPUs)...)
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
			err := launcher.Up(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if autoscale {
				err = errors.Join(err, stopAutoscaled(cfg, cmd.ErrOrStderr()))
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "number of server processes")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "parent data directory; node i uses <data-dir>/node<i>")
	f.IntVar(&cfg.BasePort, "base-port", cfg.BasePort, "gRPC port of node 1; node i uses base-port+10*(i-1) and the next 9 ports")
	f.StringVar(&cfg.Binary, "binary", "", "tidekv executable to run (default: this executable)")
	f.BoolVar(&autoscale, "autoscale", false, "let the cluster add and remove nodes itself (local processes, in <data-dir>/autoscaled)")
	f.IntVar(&maxNodes, "max-nodes", 4, "with --autoscale: never more nodes than this")
	f.Float64Var(&cfg.NodeCPUs, "node-cpus", 0, "run each node in a cgroup of its own with a quota of this many CPUs (e.g. 0.5; at least 0.1; Linux, as root; docs/operations.md, \"Node CPU size\"); 0: nodes share the machine")
	return cmd
}

// stopAutoscaled stops the nodes the local actuator started for the
// cluster (they run detached from `up`); their data stays, as the other
// nodes' does.
func stopAutoscaled(cfg launcher.Config, errOut io.Writer) error {
	lc := local.DefaultConfig()
	lc.Dir, lc.Binary = local.DirBeside(cfg.Node(1).DataDir), cfg.Binary
	act, err := local.New(lc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*lc.StopGrace)
	defer cancel()
	n, err := act.StopAll(ctx)
	if n > 0 {
		fmt.Fprintf(errOut, "stopped %d node(s) the autoscaler had started\n", n)
	}
	return err
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
