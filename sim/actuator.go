package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/placement"
)

// simActuator is the model of a node actuator: a node asked for joins
// Options.NodeStartTime later with the cluster's node spec; the node to
// remove is the newest live one; removing a drained node takes it out of
// the cluster.
type simActuator struct {
	s    *Sim
	spec NodeSpec
}

func (a simActuator) Name() string { return "sim" }

func (a simActuator) ScaleOut(_ context.Context, count int, _ []string) (string, error) {
	s := a.s
	at := s.clock.Now().Add(s.opts.NodeStartTime)
	for i := 0; i < count; i++ {
		s.starting = append(s.starting, startingNode{at: at, spec: a.spec})
	}
	return fmt.Sprintf("%d node(s) starting, joining in %v", count, s.opts.NodeStartTime), nil
}

func (a simActuator) Victim(members []control.Member) (control.Member, error) {
	var best control.Member
	for _, m := range members {
		if m.ID > best.ID {
			best = m
		}
	}
	if best.ID == 0 {
		return best, fmt.Errorf("no live node to remove")
	}
	return best, nil
}

func (a simActuator) Remove(_ context.Context, m control.Member) (string, error) {
	n := a.s.node(m.ID)
	if n == nil || n.gone {
		return "already gone", nil
	}
	if n.replicas > 0 {
		return "", fmt.Errorf("node %d still holds %d replicas", m.ID, n.replicas)
	}
	n.gone = true
	a.s.logf("n%d removed by the actuator", m.ID)
	return fmt.Sprintf("node %d stopped", m.ID), nil
}

// Decommission implements control.Decommissioner on the model.
func (a simActuator) Decommission(_ context.Context, node uint64) error {
	return a.s.Decommission(node)
}

// startingNode is a node the actuator started that has not joined yet.
type startingNode struct {
	at   time.Time
	spec NodeSpec
}

// joinStarted adds the started nodes whose time has come.
func (s *Sim) joinStarted() {
	now := s.clock.Now()
	kept := s.starting[:0]
	for _, n := range s.starting {
		if now.Before(n.at) {
			kept = append(kept, n)
			continue
		}
		s.AddNode(n.spec)
	}
	s.starting = kept
}

// liveNodes counts the nodes that serve (live or draining).
func (s *Sim) liveNodes() int {
	k := 0
	for _, n := range s.nodes {
		if n.up() && n.state != placement.NodeSuspect {
			k++
		}
	}
	return k
}
