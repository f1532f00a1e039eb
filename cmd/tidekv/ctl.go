package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/cliformat"
)

// ctlOptions are the flags shared by every ctl subcommand.
type ctlOptions struct {
	addrs    string
	keyspace string
	json     bool
	timeout  time.Duration
	sec      clientSecurity
}

// Exit codes: 1 for a missing key (so scripts can test for it), 2 for any
// other failure, usage errors included.
const ctlFailure = 2

// keyNotFoundError is get's answer for a missing key.
type keyNotFoundError struct{ key []byte }

func (e *keyNotFoundError) Error() string { return fmt.Sprintf("key %q not found", e.key) }

func ctlFail(err error) error {
	var ec *exitCodeError
	if err == nil || errors.As(err, &ec) {
		return err
	}
	if strings.Contains(err.Error(), "error reading server preface") {
		// A plaintext client reaching a TLS listener sees only an EOF.
		err = fmt.Errorf("%w (the node may be serving TLS: give --certs-dir, see docs/security.md)", err)
	}
	return &exitCodeError{code: ctlFailure, err: err}
}

func newCtlCmd() *cobra.Command {
	o := &ctlOptions{}
	cmd := &cobra.Command{
		Use:   "ctl",
		Short: "Read, write and administer a running cluster",
		Long: `ctl talks to a running cluster over gRPC; any node will do.

Keys and values are taken literally from the arguments. Output is for humans
(non-printable bytes are Go-quoted) unless --json is given. Exit codes: 0 ok,
1 key not found (get), 2 any other error.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.addrs, "addr", "127.0.0.1:7400", "node gRPC address(es), host:port[,host:port...]")
	pf.StringVar(&o.keyspace, "keyspace", "", "the key space get, put, del and scan work in (default: the default key space)")
	pf.BoolVar(&o.json, "json", false, "print machine-readable JSON")
	pf.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up on the command after this long")
	o.sec.addFlags(pf)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return ctlFail(err) })

	cmd.AddCommand(o.newBackupCmds()...)
	cmd.AddCommand(o.keyCmds()...)
	cmd.AddCommand(o.clusterCmds()...)
	cmd.AddCommand(o.placementCmds()...)
	cmd.AddCommand(o.newAutoscaleCmd(), o.newKeySpaceCmd())
	return cmd
}

// clusterCmds show the cluster (status, events, ranges) and its settings.
func (o *ctlOptions) clusterCmds() []*cobra.Command {
	var eventLimit int
	events := o.command("events", "Show the cluster's recent events (splits, moves, leases, liveness), oldest first", 0,
		func(ctx context.Context, cl *client.Client, w io.Writer, _ []string) error {
			es, err := cl.Events(ctx, eventLimit)
			if err != nil {
				return err
			}
			v := cliformat.EventsOf(es)
			if o.json {
				return cliformat.WriteJSON(w, v)
			}
			return cliformat.EventsTable(w, v)
		})
	events.Flags().IntVar(&eventLimit, "limit", 100, "show at most the newest this many (0: all kept)")

	return []*cobra.Command{
		o.configCmd(),
		o.command("status", "Show the cluster's nodes, their load and the imbalance across them", 0,
			func(ctx context.Context, cl *client.Client, w io.Writer, _ []string) error {
				resp, err := cl.Status(ctx)
				if err != nil {
					return err
				}
				v := cliformat.StatusOf(resp)
				if o.json {
					return cliformat.WriteJSON(w, v)
				}
				return cliformat.StatusTable(w, v)
			}),
		events,
		o.command("ranges", "Show the ranges, their replicas and leaseholders (*)", 0,
			func(ctx context.Context, cl *client.Client, w io.Writer, _ []string) error {
				resp, err := cl.Ranges(ctx)
				if err != nil {
					return err
				}
				if o.json {
					return cliformat.WriteJSON(w, resp)
				}
				return cliformat.RangesTable(w, resp)
			}),
	}
}

// configCmd lists and sets cluster settings.
func (o *ctlOptions) configCmd() *cobra.Command {
	config := &cobra.Command{
		Use:   "config [KEY [VALUE]]",
		Short: "List cluster settings, or set KEY to VALUE (\"\" restores the default)",
		Long: `Cluster settings override placement defaults at runtime, for the whole
cluster (stored in the meta range): range-max-bytes, range-min-bytes,
merge-cooldown, split-qps, load-split-slack, load-split-min-qps,
hot-key-share, adaptive-read-qps, max-adaptive-replicas, balance-tolerance,
lease-tolerance, move-margin, min-move-qps, range-cooldown, node-cooldown,
bootstrap-share, rebalance; and the autoscale policy, autoscale.* (enabled,
controller, actuator, slo-p99, target-utilization, min-nodes, max-nodes,
horizon, season, node-start-time, react-after, scale-in-after, cool-down,
node-capacity, migration-min, migration-max; see ctl autoscale and
docs/elasticity.md; and for growing cache key spaces cache-min-threshold,
cache-max-threshold, cache-shed-at, cache-max-move-share, cache-rate-alpha,
cache-rate-window, cache-min-rate: docs/keyspaces.md); and gc-ttl, how long old versions stay readable
before GC removes them (10m; 1s to 720h), in key spaces without a gc-ttl of their own. Invalid combinations (range-max-bytes < 2 ×
range-min-bytes, min nodes above max nodes, ...) are refused whole. See
docs/operations.md.`,
		Args: cobra.RangeArgs(0, 2),
	}
	config.RunE = o.command(config.Use, config.Short, -1, func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
		set := map[string]string{}
		switch len(args) {
		case 1:
			return ctlFail(fmt.Errorf("config %s: give a value (\"\" restores the default)", args[0]))
		case 2:
			set[args[0]] = args[1]
		}
		got, err := cl.Settings(ctx, set)
		if err != nil {
			return err
		}
		if o.json {
			return cliformat.WriteJSON(w, got)
		}
		printSettings(w, got)
		if len(got) == 0 {
			fmt.Fprintln(w, "no settings overridden (all defaults)")
		}
		return nil
	}).RunE

	return config
}

// placementCmds move data by hand: splits, replicas, leases, decommission.
func (o *ctlOptions) placementCmds() []*cobra.Command {
	var wait bool
	decommission := o.command("decommission NODE", "Drain NODE: move its replicas away one at a time (--wait: until it owns nothing)", 1,
		func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
			return o.decommission(ctx, cl, w, args[0], true, wait)
		})
	decommission.Flags().BoolVar(&wait, "wait", false, "print progress until the node owns nothing (bounded by --timeout)")

	return []*cobra.Command{
		decommission,
		o.command("recommission NODE", "Cancel a decommission: NODE takes replicas again", 1,
			func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
				return o.decommission(ctx, cl, w, args[0], false, false)
			}),
		o.command("split KEY", "Split the range containing KEY at KEY", 1,
			func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
				resp, err := cl.Split(ctx, []byte(args[0]))
				if err != nil {
					return err
				}
				if o.json {
					return cliformat.WriteJSON(w, resp)
				}
				return cliformat.DescriptorTable(w, &tidekvpb.RangeInfo{Desc: resp.GetLeft()}, &tidekvpb.RangeInfo{Desc: resp.GetRight()})
			}),
		o.replicaCommand("add-replica RANGE NODE", "Add a voter for RANGE on NODE (learner, snapshot, catch-up, promotion)", 2,
			func(a []uint64) (uint64, uint64) { return a[1], 0 }),
		o.replicaCommand("remove-replica RANGE NODE", "Remove NODE's replica of RANGE (refused below the replication factor)", 2,
			func(a []uint64) (uint64, uint64) { return 0, a[1] }),
		o.replicaCommand("move-replica RANGE FROM TO", "Move RANGE's replica from node FROM to node TO (one joint-consensus change)", 3,
			func(a []uint64) (uint64, uint64) { return a[2], a[1] }),
		o.command("transfer-lease RANGE NODE", "Move the lease of RANGE to NODE", 2,
			func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
				ids, err := parseIDs(args)
				if err != nil {
					return err
				}
				rangeID, node := ids[0], ids[1]
				if err := cl.TransferLease(ctx, rangeID, node); err != nil {
					return err
				}
				return o.done(w, (&cliformat.Object{}).Set("range_id", rangeID).Set("target_node_id", node).Set("ok", true), "OK")
			}),
	}
}

// keyValues are the key operations of ctl, on the default key space
// (client.Client) or a named one (client.KeySpace).
type keyValues interface {
	Get(ctx context.Context, key []byte, opts ...client.ReadOption) ([]byte, error)
	Put(ctx context.Context, key, value []byte) error
	Delete(ctx context.Context, key []byte) (bool, error)
	Scan(ctx context.Context, start, end []byte, limit int, opts ...client.ReadOption) ([]client.KeyValue, error)
}

// keyCommand is command for the key operations, which work in the key
// space --keyspace names.
func (o *ctlOptions) keyCommand(use, short string, nargs int, fn func(context.Context, keyValues, io.Writer, []string) error) *cobra.Command {
	return o.command(use, short, nargs, func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
		kv, err := o.keySpace(ctx, cl)
		if err != nil {
			return err
		}
		return fn(ctx, kv, w, args)
	})
}

// keySpace is the key space --keyspace names.
func (o *ctlOptions) keySpace(ctx context.Context, cl *client.Client) (keyValues, error) {
	if o.keyspace == "" {
		return cl, nil
	}
	return cl.KeySpace(ctx, o.keyspace)
}

// printSettings prints settings as "key = value" lines in key order.
func printSettings(w io.Writer, settings map[string]string) {
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "%s = %s\n", k, settings[k])
	}
}

// readFlagUsage documents --read on get, scan and bench.
const readFlagUsage = "read mode: linearizable (from the leaseholder), any (cheapest replica, may be stale) or bounded:DURATION (cheapest replica at most DURATION behind, e.g. bounded:500ms); see docs/read-modes.md"

// command builds a subcommand taking exactly nargs arguments (any number
// for -1) that runs fn with a client and the --timeout deadline.
func (o *ctlOptions) command(use, short string, nargs int, fn func(context.Context, *client.Client, io.Writer, []string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if nargs >= 0 && len(args) != nargs {
				return ctlFail(fmt.Errorf("%s: want %d argument(s), got %d", use, nargs, len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := client.DefaultConfig()
			for a := range strings.SplitSeq(o.addrs, ",") {
				if a = strings.TrimSpace(a); a != "" {
					cfg.Addrs = append(cfg.Addrs, a)
				}
			}
			if err := o.sec.apply(&cfg); err != nil {
				return ctlFail(err)
			}
			cl, err := client.New(cfg)
			if err != nil {
				return ctlFail(err)
			}
			defer cl.Close()
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, cancel := context.WithTimeout(ctx, o.timeout)
			defer cancel()
			err = fn(ctx, cl, cmd.OutOrStdout(), args)
			if knf := (*keyNotFoundError)(nil); errors.As(err, &knf) {
				return err // exit code 1, unlike other failures
			}
			return ctlFail(err)
		},
	}
}

// replicaCommand runs a replica change; change maps the parsed IDs (range
// first, then nodes) to the nodes to add and remove.
func (o *ctlOptions) replicaCommand(use, short string, nargs int, change func(ids []uint64) (add, remove uint64)) *cobra.Command {
	return o.command(use, short, nargs, func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
		ids, err := parseIDs(args)
		if err != nil {
			return err
		}
		addID, removeID := change(ids)
		desc, err := cl.ChangeReplicas(ctx, ids[0], addID, removeID)
		if err != nil {
			return err
		}
		if o.json {
			return cliformat.WriteJSON(w, desc)
		}
		return cliformat.DescriptorTable(w, &tidekvpb.RangeInfo{Desc: desc})
	})
}

// decommission starts or cancels a drain and, with wait, polls until the
// node owns nothing, printing progress.
func (o *ctlOptions) decommission(ctx context.Context, cl *client.Client, w io.Writer, arg string, drain, wait bool) error {
	node, err := parseID(arg, "NODE must be a positive node id")
	if err != nil {
		return err
	}
	left, err := cl.Decommission(ctx, node, drain)
	if err != nil {
		return err
	}
	report := func(left int) error {
		msg := fmt.Sprintf("node %d: draining, %d replicas left", node, left)
		switch {
		case !drain:
			msg = fmt.Sprintf("node %d: recommissioned, holds %d replicas", node, left)
		case left == 0:
			msg = fmt.Sprintf("node %d: drained, owns nothing and may be stopped", node)
		}
		return o.done(w, (&cliformat.Object{}).Set("node_id", node).Set("draining", drain).Set("replicas", left), msg)
	}
	for wait && left > 0 {
		if err := report(left); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d still holds %d replicas: %w", node, left, ctx.Err())
		case <-time.After(time.Second):
		}
		if left, err = cl.Decommission(ctx, node, drain); err != nil {
			return err
		}
	}
	return report(left)
}

// done prints the outcome of a write: obj with --json, else msg.
func (o *ctlOptions) done(w io.Writer, obj *cliformat.Object, msg string) error {
	if o.json {
		return cliformat.WriteJSON(w, obj)
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}

// parseIDs parses RANGE and then NODE arguments (a node may be written n3).
func parseIDs(args []string) ([]uint64, error) {
	ids := make([]uint64, len(args))
	for i, a := range args {
		what := "NODE must be a positive node id"
		if i == 0 {
			what = "RANGE must be a positive range id"
		}
		id, err := parseID(a, what)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

// parseID parses a positive ID (a node may be written n3); what is the
// error's message.
func parseID(a, what string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimPrefix(a, "n"), 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%s, got %q", what, a)
	}
	return id, nil
}
