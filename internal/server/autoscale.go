package server

import (
	"context"
	"encoding/json"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/actuator"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The elasticity controller runs in the same round as placement
// (control.Loop.Autoscaler). Its policy is Config.Autoscale with the
// autoscale.* cluster settings applied; its actuator is built from the
// policy's name and Config.Actuators when the name changes.

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
		s.bg.Go(f)
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
	resp, err := adminroute.Meta(ctx, s.route, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.AutoscaleStatusResponse, error) {
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
