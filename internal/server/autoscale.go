package server

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/actuator"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/units"
)

// The elasticity controller runs in the same round as placement
// (control.Loop.Autoscaler). Its policy is Config.Autoscale with the
// autoscale.* cluster settings applied; its actuator is built from the
// policy's name and Config.Actuators when the name changes.

var autoscaleSettings = map[string]setting{
	"autoscale.enabled": {"let the controller add and remove nodes (true) or only recommend and set the migration rate (false)",
		func(c *clusterConfig, v string) (err error) {
			c.Autoscale.Enabled, err = strconv.ParseBool(v)
			return err
		}},
	"autoscale.controller": {"static, reactive, proactive or combined", func(c *clusterConfig, v string) error {
		c.Autoscale.Controller = v
		return nil
	}},
	"autoscale.actuator": {"how nodes are added and removed: local, kubernetes or manual", func(c *clusterConfig, v string) error {
		c.Autoscale.Actuator = v
		return nil
	}},
	"autoscale.slo-p99":            durationSetting(func(c *clusterConfig) *time.Duration { return &c.Autoscale.SLOP99 }, "foreground p99 target"),
	"autoscale.horizon":            durationSetting(func(c *clusterConfig) *time.Duration { return &c.Autoscale.Horizon }, "how far past a new node's lead time the forecast is read"),
	"autoscale.season":             durationSetting(func(c *clusterConfig) *time.Duration { return &c.Autoscale.Season }, "the load's period for the forecaster (0: none)"),
	"autoscale.node-start-time":    durationSetting(func(c *clusterConfig) *time.Duration { return &c.Autoscale.NodeStartTime }, "how long a new node takes to start serving"),
	"autoscale.scale-in-after":     durationSetting(func(c *clusterConfig) *time.Duration { return &c.Autoscale.ScaleInAfter }, "how long the load must fit in one node fewer before one leaves"),
	"autoscale.cool-down":          durationSetting(func(c *clusterConfig) *time.Duration { return &c.Autoscale.CoolDown }, "least time after a scaling action before a scale-in"),
	"autoscale.target-utilization": floatClusterSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.TargetUtilization }, "share of a node's capacity at the SLO the planner fills (0..1]"),
	"autoscale.node-capacity":      floatClusterSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.NodeCapacity }, "a node's requests/s at full use, until learned"),
	"autoscale.min-nodes":          intSetting(func(c *clusterConfig) *int { return &c.Autoscale.MinNodes }, "never fewer nodes"),
	"autoscale.max-nodes":          intSetting(func(c *clusterConfig) *int { return &c.Autoscale.MaxNodes }, "never more nodes"),
	"autoscale.react-after":        intSetting(func(c *clusterConfig) *int { return &c.Autoscale.ReactAfter }, "rounds over the thresholds before the reactive rule adds nodes"),
	"autoscale.migration-min":      bytesSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.Bandwidth.Min }, "migration rate floor per node (bytes/s)"),
	"autoscale.migration-max":      bytesSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.Bandwidth.Max }, "migration rate ceiling per node when foreground is light (bytes/s)"),
	// Growing cache key spaces (elastic.OverflowConfig, docs/keyspaces.md).
	"autoscale.cache-min-threshold": floatClusterSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.Overflow.MinThreshold },
		"growing cache key spaces: lowest pre-launch threshold T, as a share of the capacity per node"),
	"autoscale.cache-max-threshold": floatClusterSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.Overflow.MaxThreshold },
		"growing cache key spaces: highest pre-launch threshold T, as a share of the capacity per node (equal to the lowest: T fixed)"),
	"autoscale.cache-shed-at": floatClusterSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.Overflow.ShedAt },
		"growing cache key spaces: share of the capacity at which a node moves data away"),
	"autoscale.cache-max-move-share": floatClusterSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.Overflow.MaxMoveShare },
		"growing cache key spaces: largest range, as a share of the capacity, that moves whole (a bigger one is split first)"),
	"autoscale.cache-rate-alpha": floatClusterSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.Overflow.RateAlpha },
		"growing cache key spaces: smoothing of the fill rate per round (0..1]"),
	"autoscale.cache-rate-window": durationSetting(func(c *clusterConfig) *time.Duration { return &c.Autoscale.Overflow.RateWindow },
		"growing cache key spaces: how long the lowest and highest fill rates are remembered"),
	"autoscale.cache-min-rate": bytesSetting(func(c *clusterConfig) *float64 { return &c.Autoscale.Overflow.MinRate },
		"growing cache key spaces: floor of the lowest fill rate (bytes/s)"),
}

func durationSetting(field func(*clusterConfig) *time.Duration, help string) setting {
	return setting{help + " (duration)", func(c *clusterConfig, v string) (err error) {
		*field(c), err = time.ParseDuration(v)
		return err
	}}
}

func floatClusterSetting(field func(*clusterConfig) *float64, help string) setting {
	return setting{help, func(c *clusterConfig, v string) (err error) {
		*field(c), err = strconv.ParseFloat(v, 64)
		return err
	}}
}

func intSetting(field func(*clusterConfig) *int, help string) setting {
	return setting{help, func(c *clusterConfig, v string) (err error) {
		*field(c), err = strconv.Atoi(v)
		return err
	}}
}

func bytesSetting(field func(*clusterConfig) *float64, help string) setting {
	return setting{help + "; KiB/MiB/GiB suffixes", func(c *clusterConfig, v string) error {
		b, err := units.ParseBytes(v)
		*field(c) = float64(b)
		return err
	}}
}

// applyAutoscale brings the autoscaler in line with policy: the policy
// itself, and a new actuator when its name changed. An actuator that
// cannot be built (no Kubernetes API here, say) is an event; the
// controller then only sets the migration rate until it can.
func (c *controlState) applyAutoscale(s *Server, policy elastic.Policy) {
	a := c.loop.Autoscaler
	a.SetPolicy(policy)
	if policy.Actuator == c.actuatorName {
		return
	}
	act, err := actuator.New(policy.Actuator, s.cfg.Actuators)
	if err != nil {
		c.actuatorName = policy.Actuator
		a.SetScaler(nil)
		s.events.Record("scale-out-failed", "cluster", "actuator %s cannot be used: %v", policy.Actuator, err)
		return
	}
	c.useActuator(s, policy.Actuator, act)
}

// useActuator makes the autoscaler scale through act, the actuator the
// policy names name (caller holds mu).
func (c *controlState) useActuator(s *Server, name string, act control.Actuator) {
	c.actuatorName = name
	spawn := func(f func()) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			f()
		}()
	}
	c.loop.Autoscaler.SetScaler(control.NewScaler(control.DefaultScalerConfig(), act, decommissioner{s}, spawn, eventSink{s}))
}

// decommissioner drains a node for a scale-in (or keeps it after all)
// through the admin path an operator's `ctl decommission` takes.
type decommissioner struct{ s *Server }

func (d decommissioner) Decommission(ctx context.Context, node uint64, drain bool) error {
	_, err := (&adminService{s: d.s}).Decommission(ctx, &tidekvpb.DecommissionRequest{NodeId: node, Drain: drain})
	return err
}

// AutoscaleStatus answers on the meta leaseholder (others forward): the
// elasticity controller's status as JSON.
func (a *adminService) AutoscaleStatus(ctx context.Context, req *tidekvpb.AutoscaleStatusRequest) (*tidekvpb.AutoscaleStatusResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := callMeta(ctx, s, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.AutoscaleStatusResponse, error) {
		b, err := json.Marshal(s.ctl.loop.Autoscaler.Status())
		if err != nil {
			return nil, err
		}
		return &tidekvpb.AutoscaleStatusResponse{Json: string(b)}, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.AutoscaleStatusResponse, error) {
		return c.AutoscaleStatus(ctx, req)
	})
	return resp, s.toStatus(err)
}
