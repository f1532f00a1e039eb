package ctlloop

import (
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/elastic"
)

// The elasticity controller runs in the same round as placement
// (control.Loop.Autoscaler). Its policy is Config.Autoscale with the
// autoscale.* cluster settings applied; its actuator is built from the
// policy's name (Node.Actuator) when the name changes.

// applyAutoscale brings the autoscaler in line with policy: the policy
// itself, and a new actuator when its name changed. An actuator that
// cannot be built (no Kubernetes API here, say) is an event; the
// controller then only sets the migration rate until it can (caller
// holds mu).
func (c *Loop) applyAutoscale(policy elastic.Policy) {
	a := c.loop.Autoscaler
	a.SetPolicy(policy)
	if policy.Actuator == c.actuatorName {
		return
	}
	act, err := c.node.Actuator(policy.Actuator)
	if err != nil {
		c.actuatorName = policy.Actuator
		a.SetScaler(nil)
		c.node.Record("scale-out-failed", "cluster", "actuator %s cannot be used: %v", policy.Actuator, err)
		return
	}
	c.useActuator(policy.Actuator, act)
}

// UseActuator makes the autoscaler scale through act, as if the policy
// named it name (tests give theirs).
func (c *Loop) UseActuator(name string, act control.Actuator) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.useActuator(name, act)
}

// useActuator is UseActuator with mu held.
func (c *Loop) useActuator(name string, act control.Actuator) {
	c.actuatorName = name
	c.loop.Autoscaler.SetScaler(control.NewScaler(control.DefaultScalerConfig(), act, c.node, c.d.Spawn, eventSink{c.node}))
}
