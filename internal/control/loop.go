package control

import (
	"fmt"
	"slices"

	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/placement"
)

// Loop is one control loop: each Round turns an observation into decisions
// and hands them to the runner. The server runs it on the meta range's
// leaseholder every Config.Interval; the simulator runs the same Loop in
// virtual time.
type Loop struct {
	Controller *Controller
	Runner     *Runner
	Sink       EventSink
	// Autoscaler, when set, plans the node count and the migration
	// bandwidth after placement has decided.
	Autoscaler *Autoscaler
}

// Round runs one round and returns what it decided. Operators the runner
// could not start now are dropped: the next round decides again.
func (l *Loop) Round(obs Observation) Decisions {
	d := l.Urgent(obs)
	if l.Autoscaler != nil {
		settling, joining := 0, 0
		for _, n := range d.Snapshot.Nodes {
			if n.State == placement.NodeLive && n.Phase != placement.PhaseNone {
				settling++
			}
			if n.State == placement.NodeLive && n.Phase == placement.PhaseOne {
				joining++
			}
		}
		l.Autoscaler.Round(obs, l.Controller.Policy().ReplicationFactor, settling, joining)
	}
	return d
}

// Urgent runs placement alone, between the periodic rounds, for a change
// that should not wait for the next one (a range that outgrew Θmax). The
// autoscaler plans once per interval, so it waits for Round.
func (l *Loop) Urgent(obs Observation) Decisions {
	if l.Autoscaler != nil {
		// Lease balance weighs nodes by their measured capacity; the
		// model learns from the nodes' load and CPU reports, so the
		// observation's nodes carry none of their own.
		caps := l.Autoscaler.Capacities()
		for i := range obs.Nodes {
			obs.Nodes[i].Capacity = caps[obs.Nodes[i].ID]
		}
	}
	busy, inFlight := l.Runner.Busy()
	d := l.Controller.Decide(obs, busy, inFlight, l.Runner.Recent())
	for _, e := range d.Events {
		l.Sink.Event(e)
	}
	touched := map[uint64][]placement.Operator{}
	for _, op := range d.Ops {
		if err := checkPlanned(op, busy, touched); err != nil {
			l.Sink.Event(Event{Kind: EventPolicyBug, Subject: events.RangeSubject(op.Range), Reason: Describe(op) + ": " + err.Error()})
			continue
		}
		if _, err := l.Runner.Start(op); err == nil {
			touched[op.Range] = append(touched[op.Range], op)
			if op.Kind == placement.OpMerge {
				touched[op.Other] = append(touched[op.Other], op)
			}
		}
	}
	return d
}

// checkPlanned refuses an operator on a range that already has one, in
// flight or earlier in the same plan (a valid one) that it may not run
// beside (placement.Together): the policies are told which ranges are
// busy, so such an operator is a policy bug.
func checkPlanned(op placement.Operator, busy map[uint64]bool, touched map[uint64][]placement.Operator) error {
	for _, id := range []uint64{op.Range, op.Other} {
		switch {
		case id == 0:
		case slices.ContainsFunc(touched[id], func(t placement.Operator) bool { return !placement.Together(t, op) }):
			return fmt.Errorf("second operator for range %d in one plan", id)
		case busy[id]:
			return fmt.Errorf("range %d is busy (in Snapshot.Busy)", id)
		}
	}
	return nil
}
