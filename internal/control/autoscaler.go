package control

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/placement"
)

// Autoscaler is the elasticity half of a round: the planner's migration
// allowance goes to the runner (and from there to every node), and when
// scaling is enabled its node count goes to the Scaler. The bandwidth
// controller runs even with scaling disabled: it replaces a fixed cap.
// Safe for concurrent use (status is read while rounds run).
type Autoscaler struct {
	runner *Runner
	sink   EventSink

	mu       sync.Mutex
	planner  *elastic.Planner
	scaler   *Scaler // nil: no actuator (scaling cannot be enabled)
	last     elastic.Output
	lastIn   elastic.Input
	reported float64       // the allowance last reported as an event
	timeline []StatusPoint // the last timelineRounds rounds
}

// timelineRounds is how many rounds status keeps: five minutes at the
// default interval.
const timelineRounds = 300

// NewAutoscaler plans with p every interval, moves nodes through scaler
// (nil for none) and sets runner's migration rate, starting from the
// rate the runner was configured with.
func NewAutoscaler(p elastic.Policy, interval time.Duration, scaler *Scaler, runner *Runner, sink EventSink) *Autoscaler {
	return &Autoscaler{runner: runner, sink: sink, planner: elastic.NewPlanner(p, interval, runner.MigrationRate()), scaler: scaler}
}

// SetPolicy changes the policy from the next round.
func (a *Autoscaler) SetPolicy(p elastic.Policy) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.planner.SetPolicy(p)
}

// SetScaler replaces the scaler (the actuator changed).
func (a *Autoscaler) SetScaler(s *Scaler) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.scaler = s
}

// Policy is the policy in force.
func (a *Autoscaler) Policy() elastic.Policy {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.planner.Policy()
}

// Capacities is each measured node's throughput at the SLO as the capacity
// model last learnt it (elastic.Planner.Measured); nodes not measured yet
// are absent.
func (a *Autoscaler) Capacities() map[uint64]float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.planner.Measured()
}

// Round plans from obs and acts; rf is the replication factor, settling
// the nodes still bootstrapping, joining those of them in its first
// phase.
func (a *Autoscaler) Round(obs Observation, rf, settling, joining int) {
	a.mu.Lock()
	in := a.input(obs, rf)
	in.Settling, in.Joining = settling, joining
	out := a.planner.Round(in)
	a.last, a.lastIn = out, in
	a.timeline = append(a.timeline, StatusPoint{At: in.Now, Nodes: len(in.Serving), TargetNodes: out.Target,
		OfferedOps: in.Offered, P99Ms: ms(in.P99), MigrationBytesPerSec: out.Bandwidth})
	if over := len(a.timeline) - timelineRounds; over > 0 {
		a.timeline = a.timeline[over:]
	}
	p, scaler := a.planner.Policy(), a.scaler
	report := a.reported == 0 || math.Abs(math.Log2(out.Bandwidth/a.reported)) >= 1
	if report {
		a.reported = out.Bandwidth
	}
	a.mu.Unlock()

	a.runner.SetMigrationRate(out.Bandwidth)
	a.overflow(out.Overflow)
	if report {
		a.sink.Event(Event{Kind: "bandwidth", Subject: "cluster", Reason: out.BandwidthReason})
	}
	if scaler == nil {
		return
	}
	action := ScaleAction{From: len(in.Serving) + in.PendingOut + in.Suspect, Reason: out.Reason, Proactive: out.Proactive}
	switch {
	case !p.Enabled:
		// Disabled: follow what is under way, start nothing.
	case out.Delta > 0:
		action.Kind, action.To = ScaleOut, action.From+out.Delta
	case out.Delta < 0:
		action.Kind, action.To, action.Overlap = ScaleIn, action.From-1, out.Overlap
	}
	scaler.Round(action, ViewOf(obs))
}

// input derives the planner's view: serving nodes are live and not
// draining; the cluster's p99 is the worst among nodes serving a
// noticeable share (elastic.Policy.Noticeable: an idle node's tail says
// nothing).
func (a *Autoscaler) input(obs Observation, rf int) elastic.Input {
	in := elastic.Input{Now: obs.Now, RF: rf, Samples: map[uint64]elastic.Sample{}}
	if a.scaler != nil {
		in.PendingOut, in.PendingIn = a.scaler.Pending()
	}
	live := 0
	for _, n := range obs.Nodes {
		if n.State == placement.NodeSuspect {
			in.Suspect++
		}
		if n.State == placement.NodeLive {
			live++
		}
		if n.State != placement.NodeLive && n.State != placement.NodeDraining {
			continue
		}
		s := obs.Signals[n.ID]
		in.Offered += s.Ops + s.Rejected
		in.Rejected += s.Rejected
	}
	moving := a.movingData(obs)
	in.Moving = len(moving) > 0
	for _, n := range obs.Nodes {
		if n.State != placement.NodeLive {
			continue
		}
		s := obs.Signals[n.ID]
		in.Serving = append(in.Serving, n.ID)
		if !moving[n.ID] {
			in.Samples[n.ID] = elastic.Sample{Ops: s.Ops, Rejected: s.Rejected, Utilization: s.CPU, P99: s.P99}
		}
		if a.planner.Policy().Noticeable(s.Ops+s.Rejected, in.Offered, live) {
			in.P99 = max(in.P99, s.P99)
		}
		in.Queue = max(in.Queue, s.QueueUtil)
	}
	for _, r := range obs.Ranges {
		in.ReplicaBytes += float64(r.Bytes) * float64(len(r.Replicas))
	}
	in.Caches = a.caches(obs)
	return in
}

// caches is the overflow policy's view of the key spaces that grow when
// full: their ranges with the nodes holding them and whether an
// operator runs on them.
func (a *Autoscaler) caches(obs Observation) []elastic.CacheSpace {
	busy, _ := a.runner.Busy()
	var out []elastic.CacheSpace
	for _, c := range obs.Caches {
		if !c.Grow || c.CapacityPerNode == 0 {
			continue
		}
		sp := elastic.CacheSpace{Name: c.Name, Capacity: c.CapacityPerNode}
		for _, r := range obs.Ranges {
			if r.ControlLoop || !c.Holds(r.Start) {
				continue
			}
			cr := elastic.CacheRange{ID: r.ID, Generation: r.Generation, Bytes: r.Bytes, Busy: busy[r.ID] || r.MergingInto != 0}
			for _, rep := range r.Replicas {
				cr.Nodes = append(cr.Nodes, rep.Node)
			}
			sp.Ranges = append(sp.Ranges, cr)
		}
		out = append(out, sp)
	}
	return out
}

// overflow starts the sheds the overflow policy planned and records its
// notes. Sheds run whether or not scaling is enabled: moving data to a
// node with room needs no new node.
func (a *Autoscaler) overflow(plan elastic.OverflowPlan) {
	for _, n := range plan.Notes {
		a.sink.Event(Event{Kind: EventOverflow, Subject: "cluster", Reason: n})
	}
	for _, sh := range plan.Sheds {
		op := placement.Operator{Kind: placement.OpMoveReplica, Range: sh.Range, Source: sh.From, Target: sh.To, Bytes: sh.Bytes,
			Policy: "overflow", Reason: sh.Reason}
		if sh.Split {
			// No split key: the leaseholder splits where the data halves.
			op = placement.Operator{Kind: placement.OpSplit, Range: sh.Range, Generation: sh.Generation, Policy: "overflow", Reason: sh.Reason}
		}
		if _, err := a.runner.Start(op); err == nil {
			a.sink.Event(Event{Kind: EventOverflow, Subject: events.RangeSubject(sh.Range), Reason: Describe(op)})
		}
	}
}

// EventOverflow is the kind of event for what the overflow policy of
// cache key spaces decided or noticed.
const EventOverflow = "overflow"

// movingData is the nodes sending or receiving a snapshot now: their
// utilisation includes migration, so their samples would understate what
// they serve (the capacity model learns from the others).
func (a *Autoscaler) movingData(obs Observation) map[uint64]bool {
	_, inFlight := a.runner.Busy()
	leaseholder := map[uint64]uint64{}
	for _, r := range obs.Ranges {
		leaseholder[r.ID] = r.Leaseholder
	}
	moving := map[uint64]bool{}
	for _, op := range inFlight {
		switch op.Kind {
		case placement.OpAddVoter, placement.OpAddLearner, placement.OpMoveReplica:
			moving[op.Target], moving[op.Source], moving[leaseholder[op.Range]] = true, true, true
		}
	}
	return moving
}

// Status is what operators see: the policy, the last round's plan and
// the scaler's recent decisions.
func (a *Autoscaler) Status() AutoscaleStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, out, in := a.planner.Policy(), a.last, a.lastIn
	st := AutoscaleStatus{
		Enabled: p.Enabled && a.scaler != nil, Actuator: p.Actuator,
		Policy: StatusPolicy{Controller: p.Controller, SLOP99Ms: ms(p.SLOP99), MinNodes: p.MinNodes, MaxNodes: p.MaxNodes,
			TargetUtilization: p.TargetUtilization},
		Nodes: len(in.Serving), TargetNodes: out.Target, PendingOut: in.PendingOut, PendingIn: in.PendingIn,
		OfferedOps: in.Offered, P99Ms: ms(in.P99), CapacityOpsPerNode: out.CapacityAtSLO, Interference: out.Interference,
		ForecastError: out.ForecastError, MigrationBytesPerSec: out.Bandwidth, MigrationReason: out.BandwidthReason,
		Decisions: []StatusDecision{}, Timeline: slices.Clone(a.timeline),
	}
	st.Caches = []StatusCache{}
	for _, c := range out.Overflow.Spaces {
		st.Caches = append(st.Caches, StatusCache{Name: c.Name, CapacityPerNode: c.Capacity, ThresholdBytes: c.Threshold, FullestNode: c.Fullest, FullestBytes: c.Fill})
	}
	for _, f := range out.Forecast {
		st.Forecast = append(st.Forecast, ForecastPoint{At: in.Now.Add(f.After), Ops: f.Ops})
	}
	if a.scaler != nil {
		for _, r := range a.scaler.History() {
			st.Decisions = append(st.Decisions, StatusDecision{At: r.At, Action: r.Action, NodesBefore: r.NodesBefore, NodesAfter: r.NodesAfter, Reason: r.Reason})
		}
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
