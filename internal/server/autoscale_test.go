package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/meta"
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
		{map[string]string{"autoscale.cache-shed-at": "1.5"}, "overflow shed share 1.5 must be in (0, 1]"},
		{map[string]string{"autoscale.cache-min-threshold": "0.9", "autoscale.cache-max-threshold": "0.5"}, "0 < min ≤ max ≤ 1"},
		{map[string]string{"autoscale.cache-rate-window": "0s"}, "rate window and minimum rate must be positive"},
	} {
		if _, err := c.Settings(ctx, bad.set); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("settings %v: %v, want %q", bad.set, err, bad.want)
		}
	}
	if _, err := c.Settings(ctx, map[string]string{"autoscale.enabled": "true", "autoscale.max-nodes": "4",
		"autoscale.cache-shed-at": "0.8", "autoscale.cache-min-rate": "4KiB"}); err != nil {
		t.Fatal(err)
	}
	autoscaleStatus(t, c, func(st control.AutoscaleStatus) error {
		if !st.Enabled || st.Policy.MaxNodes != 4 || st.Policy.MinNodes != 1 {
			return fmt.Errorf("after enabling: %+v", st)
		}
		return nil
	})
	// The cache knobs reach the planner the controller (on the meta
	// leaseholder) runs.
	eventually(t, 10*time.Second, "the cache settings in the controller's policy", func() error {
		for _, s := range tc.nodes {
			if s.metaLeader() == nil {
				continue
			}
			var ov elastic.OverflowConfig
			s.meta.ctl.WithAutoscaler(func(a *control.Autoscaler) { ov = a.Policy().Overflow })
			if ov.ShedAt != 0.8 || ov.MinRate != 4096 || ov.MaxThreshold != elastic.DefaultOverflowConfig().MaxThreshold {
				return fmt.Errorf("overflow policy on node %d: %+v", s.NodeID(), ov)
			}
			return nil
		}
		return errors.New("no meta leaseholder")
	})
	// A scale-in drains its victim through the decommission path.
	victim := tc.nodes[2].NodeID()
	if err := (ctlNode{tc.nodes[0]}).Decommission(ctx, victim, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "victim draining", func() error {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		for _, ns := range st.GetNodes() {
			if ns.GetNode().GetNodeId() == victim && ns.GetState() != meta.StateDraining {
				return fmt.Errorf("node %d is %s", victim, ns.GetState())
			}
		}
		return nil
	})
}

// A node bound to one address advertises another (a pod's DNS name):
// peers join through it and the cluster lists it; a malformed one is
// refused at start.
func TestAdvertiseAddr(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	tc := startClusterWith(t, 2, func(c *Config) {
		if c.Join == nil && port != 0 {
			c.GRPCAddr, c.AdvertiseAddr = fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port)
			port = 0
		}
	})
	c := tc.client()
	want := tc.nodes[0].Addr()
	if !strings.HasPrefix(want, "localhost:") {
		t.Fatalf("node 1 advertises %s", want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eventually(t, 10*time.Second, "node 1 listed under its advertised address", func() error {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		for _, ns := range st.GetNodes() {
			if ns.GetNode().GetGrpcAddr() == want {
				return nil
			}
		}
		return fmt.Errorf("no node at %s", want)
	})
	cfg := testConfig(t)
	cfg.AdvertiseAddr = "pod-0"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `advertise address "pod-0" is not host:port`) {
		t.Fatalf("validate: %v", err)
	}
}
