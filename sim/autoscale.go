package sim

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/placement"
)

// EnableAutoscaler adds the elasticity controller to the control loop,
// as the server runs it: the same control.Autoscaler and control.Scaler,
// acting on the model through modelActuator. A node the actuator starts
// joins startDelay later with spec.
func (s *Sim) EnableAutoscaler(p elastic.Policy, spec NodeSpec, startDelay time.Duration) error {
	if err := p.Validate(s.rf); err != nil {
		return fmt.Errorf("sim: autoscale policy: %w", err)
	}
	act := &modelActuator{s: s, delay: startDelay}
	s.startSpec = spec
	sink := simSink{s}
	scaler := control.NewScaler(control.DefaultScalerConfig(), act, act, func(f func()) { f() }, sink)
	s.loop.Autoscaler = control.NewAutoscaler(p, s.opts.Control.Interval, scaler, s.loop.Runner, sink)
	s.scaler = scaler
	return nil
}

// autoscale runs the elasticity controller as a server runs it by
// default: scaling off, so no node is added or removed, but its capacity
// model weighs lease balance and its bandwidth controller sets the
// migration rate. node-capacity is the model's prior.
func (in *Interpreter) autoscale(args []Arg) error {
	p := elastic.DefaultPolicy()
	for _, a := range args {
		var err error
		switch a.Key {
		case "node-capacity":
			p.NodeCapacity, err = strconv.ParseFloat(val(a), 64)
		default:
			err = fmt.Errorf("unknown argument %q", a.Key)
		}
		if err != nil {
			return fmt.Errorf("autoscale: %w", err)
		}
	}
	return in.sim.EnableAutoscaler(p, DefaultNodeSpec(), 0)
}

// formatCapacity is each live node's capacity at the SLO as the capacity
// model measured it (what lease balance weighs nodes by), or that it has
// not measured it.
func (s *Sim) formatCapacity() string {
	if s.loop.Autoscaler == nil {
		return "no autoscaler\n"
	}
	caps := s.loop.Autoscaler.Capacities()
	var b strings.Builder
	for _, n := range s.nodes {
		if n.state != placement.NodeLive {
			continue
		}
		if c, ok := caps[n.id]; ok {
			fmt.Fprintf(&b, "n%d measured %.0f/s at the SLO\n", n.id, c)
		} else {
			fmt.Fprintf(&b, "n%d not measured\n", n.id)
		}
	}
	return b.String()
}

// AutoscaleStatus is the elasticity controller's status (zero without one).
func (s *Sim) AutoscaleStatus() control.AutoscaleStatus {
	if s.loop.Autoscaler == nil {
		return control.AutoscaleStatus{}
	}
	return s.loop.Autoscaler.Status()
}

// ScalingActions counts the scale-outs and scale-ins started.
func (s *Sim) ScalingActions() int {
	if s.scaler == nil {
		return 0
	}
	n := 0
	for _, r := range s.scaler.History() {
		if r.Action == "scale-out" || r.Action == "scale-in" {
			n++
		}
	}
	return n
}

// modelActuator starts model nodes after a delay and decommissions them
// through the model; a drained node leaves by itself (retireDrained).
type modelActuator struct {
	s     *Sim
	delay time.Duration
}

func (a *modelActuator) Name() string { return "model" }

func (a *modelActuator) ScaleOut(_ context.Context, count int, _ []string) (string, error) {
	for range count {
		a.s.starting = append(a.s.starting, a.s.clock.Now().Add(a.delay))
	}
	return fmt.Sprintf("starting %d model node(s), serving in %v", count, a.delay), nil
}

// Victim is the newest node, as a StatefulSet would remove.
func (a *modelActuator) Victim(members []control.Member) (control.Member, error) {
	if len(members) == 0 {
		return control.Member{}, fmt.Errorf("no live node")
	}
	v := members[0]
	for _, m := range members {
		if m.ID > v.ID {
			v = m
		}
	}
	return v, nil
}

func (a *modelActuator) Remove(context.Context, control.Member) (string, error) {
	return "left the model", nil
}

func (a *modelActuator) Decommission(_ context.Context, node uint64, drain bool) error {
	if !drain {
		return a.s.Recommission(node)
	}
	return a.s.Decommission(node)
}

// joinStarted adds the nodes whose start delay has passed.
func (s *Sim) joinStarted() {
	now := s.clock.Now()
	kept := s.starting[:0]
	for _, at := range s.starting {
		if now.Before(at) {
			kept = append(kept, at)
			continue
		}
		s.AddNode(s.startSpec)
		if s.cache != nil {
			s.cache.metrics.Joined = append(s.cache.metrics.Joined, s.clock.Elapsed())
		}
	}
	s.starting = kept
}
