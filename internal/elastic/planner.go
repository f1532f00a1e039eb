package elastic

import (
	"fmt"
	"math"
	"time"
)

// Input is what the planner sees in one round.
type Input struct {
	Now time.Time
	// Serving are the live nodes that are not draining; PendingOut nodes
	// were asked for and have not joined, PendingIn are draining.
	Serving               []uint64
	PendingOut, PendingIn int
	// Suspect nodes have missed heartbeats but are not dead: they serve
	// nothing now, yet a node is not started to replace them (they
	// usually come back; a dead node leaves the count).
	Suspect int
	// Offered is the cluster's offered load (served + refused, ops/s),
	// Rejected the part refused.
	Offered, Rejected float64
	// Moving: data moves between nodes now.
	Moving bool
	// P99 is the worst p99 among serving nodes; Queue the fullest
	// admission queue's occupancy in [0,1].
	P99   time.Duration
	Queue float64
	// Samples are serving nodes' foreground this round (those not moving
	// data: migration would blur what they serve). The capacity model
	// learns only from those of nodes taking a noticeable share of
	// Offered (Policy.Noticeable).
	Samples map[uint64]Sample
	// ReplicaBytes is the data of every replica in the cluster: a new
	// node receives about ReplicaBytes/(nodes+1) of it.
	ReplicaBytes float64
	// RF is the replication factor: never fewer nodes.
	RF int
	// Settling is how many serving nodes still take data as new nodes
	// (bootstrapping): capacity asked for that does not serve yet.
	// Joining is how many of them still take their first share (the
	// bootstrap's first phase): until it ends a new node does not serve
	// its part of the load.
	Settling, Joining int
	// Caches are the key spaces with a capacity per node that grow
	// rather than evict when full (the overflow policy's input).
	Caches []CacheSpace
}

// Output is one round's plan.
type Output struct {
	// Target is the node count the planner wants; Delta what to ask the
	// actuator for now (+n nodes, −1 to drain one, 0 nothing) and Reason
	// why; Proactive when the forecast, not an observed overload, drove
	// a scale-out.
	Target    int
	Delta     int
	Proactive bool
	Reason    string
	// Overlap: a scale-in (Delta −1) planned while other nodes drain,
	// which it does not wait for.
	Overlap bool
	// Bandwidth is the migration allowance (bytes/s per node) and why.
	Bandwidth       float64
	BandwidthReason string
	// Lead is how long a new node needs before it serves its share
	// (bandwidthAndForecast).
	Lead time.Duration
	// Fill is the share of capacity at the SLO a scale-out fills this
	// round (the target utilisation, or more with a trusted forecast).
	Fill float64
	// Forecast samples the expected load over the planning window.
	Forecast      []ForecastAt
	ForecastError float64
	// CapacityAtSLO and Interference are by serving node.
	CapacityAtSLO map[uint64]float64
	Interference  map[uint64]float64
	// Overflow is what the cache key spaces need: sheds to run, a
	// pre-launch (already in Target when within max nodes), notes.
	Overflow OverflowPlan
}

// ForecastAt is the load (ops/s) expected After from now.
type ForecastAt struct {
	After time.Duration
	Ops   float64
}

// Planner is the elasticity controller's state across rounds: the
// forecaster, the capacity model, the bandwidth controller, and how long
// the cluster has been overloaded or oversized.
type Planner struct {
	policy   Policy
	interval time.Duration
	fc       *Forecaster
	capacity *CapacityModel
	bw       *Bandwidth
	overflow *Overflow

	window     int       // the planning window of the last round, in rounds
	overRounds int       // consecutive rounds beyond the reactive thresholds
	fitsSince  time.Time // since when one node fewer would do (zero: not now)
	lastAction time.Time
	// capped: a pre-launch was wanted and max nodes (or the static
	// controller) refused it, as of the last round.
	capped bool
	// How long new nodes took to serve (timeLead): lead is the smoothed
	// measurement (0: none yet); leadSince when the scale-out being
	// timed was asked for (zero: none), with leadFrom nodes serving.
	lead      time.Duration
	leadSince time.Time
	leadFrom  int
}

// NewPlanner plans with p, one round every interval, moving data at
// migrationRate (bytes/s per node) until feedback changes it.
func NewPlanner(p Policy, interval time.Duration, migrationRate float64) *Planner {
	pl := &Planner{policy: p, interval: interval, overflow: NewOverflow(p.Overflow),
		capacity: NewCapacityModel(p.NodeCapacity, p.IdleP99), bw: NewBandwidth(p.Bandwidth, migrationRate)}
	// Before the first round the window is a start without data to move.
	pl.window = pl.steps(p.NodeStartTime + p.Horizon)
	pl.fc = NewForecaster(pl.steps(p.Season), pl.window)
	return pl
}

// SetPolicy changes the policy from the next round; a new season restarts
// the forecaster, and another controller (or scaling turned on or off)
// restarts the count of rounds over the thresholds and the time the load
// has fit in fewer nodes: what was seen while another controller was in
// charge is not the new one's evidence (bench elastic warms up under the
// static controller, and combined then scaled out on its first round,
// over the SLO "for 21 rounds").
func (pl *Planner) SetPolicy(p Policy) {
	if p.Controller != pl.policy.Controller || p.Enabled != pl.policy.Enabled {
		pl.overRounds, pl.fitsSince = 0, time.Time{}
	}
	if p.Season != pl.policy.Season || p.NodeStartTime+p.Horizon != pl.policy.NodeStartTime+pl.policy.Horizon {
		pl.fc = NewForecaster(pl.steps(p.Season), pl.steps(p.NodeStartTime+p.Horizon))
	}
	pl.bw.SetConfig(p.Bandwidth)
	pl.overflow.SetConfig(p.Overflow)
	pl.policy = p
}

// Policy is the policy in force.
func (pl *Planner) Policy() Policy { return pl.policy }

// Measured is each measured node's throughput at the SLO, interference
// included: what lease balance weighs nodes by. The plain planner
// (IgnoreInterference) gives none, as every node has its peers' capacity.
func (pl *Planner) Measured() map[uint64]float64 {
	if pl.policy.IgnoreInterference {
		return nil
	}
	return pl.capacity.Measured(pl.policy.SLOP99)
}

func (pl *Planner) steps(d time.Duration) int {
	return int(math.Ceil(float64(d) / float64(pl.interval)))
}

// Round learns from in and plans.
func (pl *Planner) Round(in Input) Output {
	pl.fc.Observe(in.Offered)
	pl.capacity.Observe(pl.noticeable(in), in.Serving)
	pl.timeLead(in)
	var out Output
	v := pl.view(in, &out)
	out.Fill = v.fill
	peak := pl.bandwidthAndForecast(in, v, &out)
	pl.scaleOut(in, v, peak, &out)
	out.Overflow = pl.overflow.Round(OverflowInput{Now: in.Now, Live: in.Serving, Settling: in.PendingOut > 0 || in.Settling > 0,
		Lead: pl.policy.NodeStartTime, Spaces: in.Caches})
	if out.Overflow.Launch != "" && out.Target <= v.current {
		out.Target, out.Proactive, out.Reason = v.current+1, true, out.Overflow.Launch
	}
	load := in.Offered
	if v.proactive {
		load = math.Max(load, peak) // never shrink ahead of a forecast rise
	}
	pl.scaleIn(in, &out, v, load)
	pl.bound(in, v, &out)
	pl.noteCapped(v, &out)
	switch {
	case out.Target > v.current:
		out.Delta = out.Target - v.current
	case out.Target < v.current && in.PendingOut == 0 && (in.PendingIn == 0 || v.proactive && v.trusted):
		// With a trusted forecast a scale-in does not wait for the
		// drains under way: the nodes they drain are not counted
		// (Serving), and the forecast covers the window in which a node
		// could be brought back for every drain alike. Waiting held
		// each evening's second node for the whole first drain (about
		// 110 s in the simulator) after the forecast had let it go.
		out.Delta, out.Overlap = -1, in.PendingIn > 0
	}
	if out.Delta != 0 {
		pl.lastAction, pl.fitsSince = in.Now, time.Time{}
	}
	if out.Delta > 0 && in.PendingOut == 0 && in.PendingIn == 0 {
		// New nodes are asked for now (with a node draining, the
		// scale-out keeps that one, which serves at once; with nodes
		// pending, nothing more is asked until they join).
		pl.leadSince, pl.leadFrom = in.Now, len(in.Serving)
	}
	return out
}

// noticeable is in's samples of nodes taking a noticeable share of the
// offered load: a node serving a trickle keeps what was learned of it (or
// the nominal capacity) instead of being learned from a CPU spent on
// something else, such as applying its leaders' writes. A node that
// interference slows still counts: lease balance lowers its share in
// proportion to its capacity, well above the threshold unless a
// co-runner takes nearly all of it, and below it keeps the low capacity
// it was learned at.
func (pl *Planner) noticeable(in Input) map[uint64]Sample {
	out := make(map[uint64]Sample, len(in.Samples))
	for id, s := range in.Samples {
		if pl.policy.Noticeable(s.Ops+s.Rejected, in.Offered, len(in.Serving)) {
			out[id] = s
		}
	}
	return out
}

// leadAlpha smooths the measured lead time: one slow bootstrap (a move
// held back by a foreground burst) must not set the next window alone.
const leadAlpha = 0.5

// timeLead measures how long the last scale-out's nodes took from the
// call to serving: none pending, none still taking its first share. A
// scale-out whose nodes never came (the actuator failed, or only
// recommends) measures nothing.
func (pl *Planner) timeLead(in Input) {
	if pl.leadSince.IsZero() || !in.Now.After(pl.leadSince) || in.PendingOut > 0 || in.Joining > 0 {
		return
	}
	if len(in.Serving) > pl.leadFrom {
		took := in.Now.Sub(pl.leadSince)
		if pl.lead > 0 {
			took = time.Duration(leadAlpha*float64(took) + (1-leadAlpha)*float64(pl.lead))
		}
		pl.lead = took
	}
	pl.leadSince = time.Time{}
}

// view is what a round derives from its input before deciding.
type view struct {
	current int // serving, starting and suspect nodes
	// atSLO is the serving and starting nodes' throughput at the SLO;
	// biggest one node's share of it; perNew a new node's.
	atSLO, biggest, perNew float64
	util                   float64 // offered load over capacity at the SLO
	// proactive: the forecast drives the plan (the proactive controller,
	// or the combined one with a trusted forecast); trusted: it has seen
	// twice its window and its error is within MaxForecastError. fill is
	// the share of capacity at the SLO a scale-out fills (scaleOut).
	proactive, trusted bool
	fill               float64
}

// need is the node count whose capacity, filled to fill, carries load:
// the nodes there are plus new ones.
func (v view) need(load, fill float64) int {
	return v.current + int(math.Ceil(math.Max(0, load-fill*v.atSLO)/(fill*v.perNew)))
}

// view measures the cluster's capacity and fills out's per-node figures.
func (pl *Planner) view(in Input, out *Output) view {
	p := pl.policy
	out.CapacityAtSLO, out.Interference = map[uint64]float64{}, map[uint64]float64{}
	var v view
	for _, id := range in.Serving {
		c := pl.capacity.AtSLO(id, p.SLOP99, !p.IgnoreInterference)
		out.CapacityAtSLO[id], out.Interference[id] = c, pl.capacity.Interference(id)
		v.atSLO += c
		v.biggest = math.Max(v.biggest, c)
	}
	v.perNew = pl.capacity.AtSLO(0, p.SLOP99, false)
	v.current = len(in.Serving) + in.PendingOut + in.Suspect
	v.atSLO += float64(in.PendingOut) * v.perNew
	v.util = in.Offered / math.Max(v.atSLO, 1)
	// The forecast's trust is judged on the last round's planning window
	// (this round's depends on the bandwidth decided below).
	v.trusted = pl.fc.Samples() > 2*pl.window && pl.fc.Error() <= p.MaxForecastError
	v.proactive = p.Controller == Proactive || p.Controller == Combined && v.trusted
	v.fill = p.TargetUtilization
	if v.proactive && v.trusted {
		v.fill = math.Max(v.fill, math.Min(p.ReactUtilization, 1/(1+pl.fc.Error())))
	}
	return v
}

// bandwidthAndForecast sets the migration allowance, the lead time and
// the forecast over the planning window, whose peak it returns.
//
// The lead is what new nodes took to serve on the last scale-outs, once
// there were any (before, the start time plus a new node's share of the
// data at this round's allowance). Computed from the allowance, the lead
// followed every cut: a move that nudged p99 by 10% dropped the
// allowance to its floor, the lead to minutes and the window to the next
// big peak, and a node was bought minutes early, while bootstraps took
// 30-46 s from the call (simulator). Each node still pending or taking
// data adds one lead: a new node's bootstrap pulls from the same senders
// and waits behind theirs (with the plain measured lead, the nodes a
// steep rise needs one after another were bought too late and took their
// data during the peak).
func (pl *Planner) bandwidthAndForecast(in Input, v view, out *Output) float64 {
	p := pl.policy
	// The nodes that serve now (not the new ones still taking data) are
	// above the target: moves that bring capacity are urgent, bounded by
	// the SLO only, not by the slowdown allowed to ordinary moves.
	serving := max(v.current-in.Settling-in.PendingOut-in.Suspect, 1)
	urgent := in.Settling > 0 && v.util*float64(v.current)/float64(serving) > v.fill
	out.Bandwidth, out.BandwidthReason = pl.bw.Decide(Signals{P99: in.P99, Queue: in.Queue, Moving: in.Moving,
		Urgent: urgent, Overloaded: in.Settling > 0 && in.Rejected > 0.01*in.Offered}, p.SLOP99)
	out.Lead = pl.lead * time.Duration(1+in.Settling+in.PendingOut)
	if pl.lead == 0 {
		out.Lead = p.NodeStartTime + time.Duration(in.ReplicaBytes/float64(v.current+1)/out.Bandwidth*float64(time.Second))
	}
	window := pl.steps(out.Lead + p.Horizon)
	for i := 1; i <= window; i += max(1, window/12) {
		out.Forecast = append(out.Forecast, ForecastAt{After: time.Duration(i) * pl.interval, Ops: pl.fc.Forecast(i)})
	}
	out.ForecastError = pl.fc.Error()
	pl.window = window
	return pl.fc.Peak(window)
}

// scaleOut sets the target from the reactive and proactive rules the
// controller runs.
//
// The target utilisation's headroom is for forecast error and bursts.
// A trusted forecast measures its own error, so with one the plan fills
// capacity at the SLO up to where the forecast peak, wrong by that error,
// would just reach the SLO (utilisation 1), but never past the reactive
// threshold (the reactive rule would add a node for a load the plan
// meant to carry) and never below the target utilisation. Filling only
// to where the erring peak reached the reactive threshold, as before,
// stacked the threshold's margin under the SLO on the error's: the
// combined controller bought a node for every peak and burst the
// reactive one rode out below its threshold (simulator, trace:
// docs/benchmarks/elasticity.md).
func (pl *Planner) scaleOut(in Input, v view, peak float64, out *Output) {
	p := pl.policy
	if in.P99 > p.SLOP99 || v.util > p.ReactUtilization {
		pl.overRounds++
	} else {
		pl.overRounds = 0
	}
	reactive := p.Controller == Reactive || p.Controller == Combined
	out.Target, out.Reason = v.current, fmt.Sprintf("%d node(s) carry %.0f ops/s at %.0f%% of their capacity at the SLO", v.current, in.Offered, 100*v.util)
	if reactive && pl.overRounds >= p.ReactAfter {
		n := v.need(in.Offered, p.TargetUtilization)
		if in.Settling == 0 {
			n = max(n, v.current+1) // more of the same did not help: add one
		}
		if n > out.Target {
			out.Target = n
			out.Reason = fmt.Sprintf("reactive: p99 %v against the %v SLO, utilisation %.0f%% for %d rounds; %.0f ops/s needs %d node(s) at %.0f%%",
				in.P99.Round(100*time.Microsecond), p.SLOP99, 100*v.util, pl.overRounds, in.Offered, n, 100*p.TargetUtilization)
		}
	}
	if n := v.need(peak, v.fill); v.proactive && n > out.Target {
		lead := fmt.Sprintf("start %v + data at %s", p.NodeStartTime, MiBps(out.Bandwidth))
		if pl.lead > 0 {
			lead = fmt.Sprintf("new nodes took %v, %d before this one", pl.lead.Round(time.Second), in.Settling+in.PendingOut)
		}
		out.Target, out.Proactive = n, true
		out.Reason = fmt.Sprintf("proactive: forecast peak %.0f ops/s within %v (lead %v: %s, forecast error %.0f%%) needs %d node(s) at %.0f%%",
			peak, (out.Lead + p.Horizon).Round(time.Second), out.Lead.Round(time.Second), lead, 100*out.ForecastError, n, 100*v.fill)
	}
}

// bound keeps the target within the floor (min nodes, replication
// factor) and max nodes; the static controller holds any count within
// them.
func (pl *Planner) bound(in Input, v view, out *Output) {
	p := pl.policy
	floor := p.MinServing(in.RF)
	if out.Target < floor {
		out.Target, out.Proactive = floor, false
		out.Reason = fmt.Sprintf("%d node(s) is below the minimum of %d (min nodes %d, replication factor %d)", v.current, floor, p.MinNodes, in.RF)
	}
	if ceiling := max(p.MaxNodes, floor); out.Target > ceiling {
		out.Target = ceiling
		out.Reason += fmt.Sprintf(" (capped at max nodes %d)", ceiling)
	}
	if p.Controller == Static && v.current >= floor && v.current <= p.MaxNodes {
		out.Target = v.current
	}
}

// noteCapped tells operators, once per episode, that a cache key space
// wanted a node it may not have: its full nodes will evict.
func (pl *Planner) noteCapped(v view, out *Output) {
	capped := out.Overflow.Launch != "" && out.Target <= v.current
	if capped && !pl.capped {
		out.Overflow.Notes = append(out.Overflow.Notes, fmt.Sprintf("%s; no node may be added (%d node(s), max nodes %d, controller %s): nodes that reach capacity evict",
			out.Overflow.Launch, v.current, pl.policy.MaxNodes, pl.policy.Controller))
	}
	pl.capped = capped
}

// scaleIn lowers the target by one when load (the larger of now and the
// forecast peak) fits in one node fewer at the target utilisation (with
// a trusted forecast, halfway from it to the scale-out fill):
// without a forecast once it has fit for ScaleInAfter and no scaling
// happened within CoolDown; with a trusted one at once, because the
// forecast already covers the window in which a node could be brought
// back (the lead time and the horizon) and a fixed wait only keeps a
// node the forecast says is not needed. Scale-outs with a trusted
// forecast fill more than that, so the gap between the two
// thresholds keeps a node from going and coming back as the forecast's
// error moves; and nothing is drained while new nodes still take data
// (that would move the same data back). With a trusted forecast a
// scale-in does not wait for earlier drains either (Round).
func (pl *Planner) scaleIn(in Input, out *Output, v view, load float64) {
	p := pl.policy
	// Below the caches' floor the remaining nodes would cross their
	// pre-launch threshold and ask for the node back.
	floor := max(p.MinServing(in.RF), out.Overflow.Floor)
	// With a trusted forecast a node goes once the rest carry the load
	// halfway between the target utilisation and the scale-out fill: the
	// target alone kept a node through every trough a forecast peak
	// shadows (the fill would have it back at the next error wobble).
	at := p.TargetUtilization
	if v.proactive && v.trusted {
		at = (p.TargetUtilization + v.fill) / 2
	}
	fewer := at * (v.atSLO - v.biggest)
	if out.Target != v.current || v.current-1 < floor || load > fewer || in.P99 > p.SLOP99/2 || v.proactive && v.trusted && in.Settling > 0 {
		pl.fitsSince = time.Time{}
		return
	}
	if pl.fitsSince.IsZero() {
		pl.fitsSince = in.Now
	}
	wait, cool, what := p.ScaleInAfter, p.CoolDown, "the load"
	if v.proactive && v.trusted {
		wait, cool, what = 0, 0, "the load and its forecast"
	}
	if in.Now.Sub(pl.fitsSince) < wait || in.Now.Sub(pl.lastAction) < cool {
		return
	}
	out.Target = v.current - 1
	out.Reason = fmt.Sprintf("%s (%.0f ops/s at most) fits in %d node(s) at %.0f%% of their capacity at the SLO", what, load, v.current-1, 100*at)
	if wait > 0 {
		out.Reason += fmt.Sprintf(" and has for %v", in.Now.Sub(pl.fitsSince).Round(time.Second))
	}
}
