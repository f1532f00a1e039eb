package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/elastic"
)

// autoscaleStatus polls any node (the answer comes from the meta
// leaseholder) until ok accepts the status.
func autoscaleStatus(t *testing.T, c *client.Client, ok func(control.AutoscaleStatus) error) control.AutoscaleStatus {
	t.Helper()
	var st control.AutoscaleStatus
	eventually(t, 10*time.Second, "autoscale status", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		raw, err := c.AutoscaleStatus(ctx)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("status is not JSON: %v: %s", err, raw)
		}
		return ok(st)
	})
	return st
}

// The elasticity controller runs with placement: status shows the serving
// nodes, a capacity per node and the migration allowance the bandwidth
// controller set; an impossible policy is refused whole; enabling it with
// the manual actuator is reported.
func TestAutoscaleStatusAndPolicy(t *testing.T) {
	tc := startCluster(t, 3)
	c := tc.client()
	tc.waitReplicated(c, 3)
	bw := elastic.DefaultBandwidthConfig()
	autoscaleStatus(t, c, func(st control.AutoscaleStatus) error {
		if st.Enabled || st.Actuator != "manual" || st.Nodes != 3 || st.TargetNodes != 3 || len(st.CapacityOpsPerNode) != 3 ||
			st.MigrationBytesPerSec < bw.Min || st.MigrationBytesPerSec > bw.Max || st.MigrationReason == "" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, bad := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"autoscale.min-nodes": "5", "autoscale.max-nodes": "4"}, "min nodes 5 is above max nodes 4"},
		{map[string]string{"autoscale.max-nodes": "2"}, "below the replication factor 3"},
		{map[string]string{"autoscale.actuator": "ssh"}, `unknown actuator "ssh"`},
		{map[string]string{"autoscale.slo-p99": "soon"}, "autoscale.slo-p99"},
	} {
		if _, err := c.Settings(ctx, bad.set); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("settings %v: %v, want %q", bad.set, err, bad.want)
		}
	}
	if _, err := c.Settings(ctx, map[string]string{"autoscale.enabled": "true", "autoscale.max-nodes": "4"}); err != nil {
		t.Fatal(err)
	}
	autoscaleStatus(t, c, func(st control.AutoscaleStatus) error {
		if !st.Enabled || st.Policy.MaxNodes != 4 || st.Policy.MinNodes != 1 {
			return fmt.Errorf("after enabling: %+v", st)
		}
		return nil
	})
	// A scale-in drains its victim through the decommission path.
	victim := tc.nodes[2].NodeID()
	if err := (decommissioner{tc.nodes[0]}).Decommission(ctx, victim, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "victim draining", func() error {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		for _, ns := range st.GetNodes() {
			if ns.GetNode().GetNodeId() == victim && ns.GetState() != stateDraining {
				return fmt.Errorf("node %d is %s", victim, ns.GetState())
			}
		}
		return nil
	})
}
