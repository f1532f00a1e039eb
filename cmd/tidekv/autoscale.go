package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/control"
)

// newAutoscaleCmd is `ctl autoscale`: the elasticity controller's status
// and policy. The policy lives in the meta range as autoscale.* cluster
// settings, so `ctl config` shows the same values.
func (o *ctlOptions) newAutoscaleCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "autoscale", Short: "Show or change how the cluster sizes itself (status, set, enable, disable)"}
	status := o.command("status", "Show the elasticity controller: nodes and target, capacity, interference, forecast, migration rate, recent decisions", 0,
		func(ctx context.Context, cl *client.Client, w io.Writer, _ []string) error {
			raw, err := cl.AutoscaleStatus(ctx)
			if err != nil {
				return err
			}
			if o.json {
				_, err := fmt.Fprintln(w, string(raw))
				return err
			}
			var st control.AutoscaleStatus
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("autoscale status: unreadable answer: %w", err)
			}
			return autoscaleTable(w, st)
		})
	var sf autoscaleFlags
	set := o.command("set", "Change the autoscale policy (only the flags given); an impossible policy is refused and nothing changes", 0,
		func(ctx context.Context, cl *client.Client, w io.Writer, _ []string) error {
			kv := sf.settings()
			if len(kv) == 0 {
				return fmt.Errorf("autoscale set: give at least one of --slo-p99, --min-nodes, --max-nodes, --target-utilization, --actuator, --controller, --horizon")
			}
			return o.applyAutoscale(ctx, cl, w, kv)
		})
	sf.register(set)
	toggle := func(on bool) *cobra.Command {
		name, what := "enable", "Let the controller add and remove nodes"
		if !on {
			name, what = "disable", "Stop adding and removing nodes (placement and the bandwidth controller keep running)"
		}
		return o.command(name, what, 0, func(ctx context.Context, cl *client.Client, w io.Writer, _ []string) error {
			return o.applyAutoscale(ctx, cl, w, map[string]string{"autoscale.enabled": fmt.Sprint(on)})
		})
	}
	cmd.AddCommand(status, set, toggle(true), toggle(false))
	return cmd
}

// autoscaleFlags are set's flags; only those given become settings.
type autoscaleFlags struct {
	cmd                  *cobra.Command
	slo, horizon         time.Duration
	minNodes, maxNodes   int
	utilization          float64
	actuator, controller string
}

func (f *autoscaleFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	fl := cmd.Flags()
	fl.DurationVar(&f.slo, "slo-p99", 0, "foreground p99 latency target (e.g. 25ms)")
	fl.IntVar(&f.minNodes, "min-nodes", 0, "never fewer nodes than this")
	fl.IntVar(&f.maxNodes, "max-nodes", 0, "never more nodes than this")
	fl.Float64Var(&f.utilization, "target-utilization", 0, "plan for nodes this busy, of their capacity at the SLO (0..1]")
	fl.StringVar(&f.actuator, "actuator", "", "how nodes are added and removed: local, kubernetes or manual")
	fl.StringVar(&f.controller, "controller", "", "static, reactive, proactive or combined")
	fl.DurationVar(&f.horizon, "horizon", 0, "how far ahead the forecast looks")
}

func (f *autoscaleFlags) settings() map[string]string {
	kv := map[string]string{}
	changed := func(name string) bool { return f.cmd.Flags().Changed(name) }
	if changed("slo-p99") {
		kv["autoscale.slo-p99"] = f.slo.String()
	}
	if changed("min-nodes") {
		kv["autoscale.min-nodes"] = fmt.Sprint(f.minNodes)
	}
	if changed("max-nodes") {
		kv["autoscale.max-nodes"] = fmt.Sprint(f.maxNodes)
	}
	if changed("target-utilization") {
		kv["autoscale.target-utilization"] = fmt.Sprint(f.utilization)
	}
	if changed("actuator") {
		kv["autoscale.actuator"] = f.actuator
	}
	if changed("controller") {
		kv["autoscale.controller"] = f.controller
	}
	if changed("horizon") {
		kv["autoscale.horizon"] = f.horizon.String()
	}
	return kv
}

// applyAutoscale stores the settings (all or nothing: the meta range
// validates the policy they make) and prints the autoscale settings now.
func (o *ctlOptions) applyAutoscale(ctx context.Context, cl *client.Client, w io.Writer, kv map[string]string) error {
	got, err := cl.Settings(ctx, kv)
	if err != nil {
		return err
	}
	out := map[string]string{}
	for k, v := range got {
		if strings.HasPrefix(k, "autoscale.") {
			out[k] = v
		}
	}
	if o.json {
		return json.NewEncoder(w).Encode(out)
	}
	printSettings(w, out)
	return nil
}

// autoscaleTable prints the status for people.
func autoscaleTable(w io.Writer, st control.AutoscaleStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	state := "disabled"
	if st.Enabled {
		state = "enabled"
	}
	p := st.Policy
	fmt.Fprintf(tw, "autoscale\t%s (actuator %s, controller %s)\n", state, st.Actuator, p.Controller)
	fmt.Fprintf(tw, "policy\tSLO p99 %gms, %d–%d nodes, target utilisation %.0f%%\n", p.SLOP99Ms, p.MinNodes, p.MaxNodes, 100*p.TargetUtilization)
	fmt.Fprintf(tw, "nodes\t%d serving, target %d (%d starting, %d draining)\n", st.Nodes, st.TargetNodes, st.PendingOut, st.PendingIn)
	fmt.Fprintf(tw, "load\t%.0f ops/s offered, p99 %.1fms\n", st.OfferedOps, st.P99Ms)
	fmt.Fprintf(tw, "migration\t%.1f MiB/s per node: %s\n", st.MigrationBytesPerSec/(1<<20), st.MigrationReason)
	ids := make([]uint64, 0, len(st.CapacityOpsPerNode))
	for id := range st.CapacityOpsPerNode {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		fmt.Fprintf(tw, "node %d\tcapacity %.0f ops/s at the SLO, interference %.2f\n", id, st.CapacityOpsPerNode[id], st.Interference[id])
	}
	if len(st.Forecast) > 0 {
		var parts []string
		for _, f := range st.Forecast {
			parts = append(parts, fmt.Sprintf("%s %.0f", f.At.Format("15:04:05"), f.Ops))
		}
		fmt.Fprintf(tw, "forecast\t%s (error %.0f%%)\n", strings.Join(parts, ", "), 100*st.ForecastError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Decisions) == 0 {
		_, err := fmt.Fprintln(w, "no scaling decisions yet")
		return err
	}
	fmt.Fprintln(w, "decisions:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, d := range st.Decisions {
		fmt.Fprintf(tw, "  %s\t%s\t%d→%d\t%s\n", d.At.Format("15:04:05"), d.Action, d.NodesBefore, d.NodesAfter, d.Reason)
	}
	return tw.Flush()
}
