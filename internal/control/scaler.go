package control

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/retry"
)

// ScalerConfig times how scaling actions are carried out.
type ScalerConfig struct {
	// JoinTimeout: nodes asked for that are not live within it count as a
	// failed scale-out (the actuator is retried after a back-off; they are
	// never counted as capacity before they join).
	JoinTimeout time.Duration
	// CallTimeout bounds one actuator or decommission call.
	CallTimeout time.Duration
	// RetryMin and RetryMax bound the back-off after a failure; it doubles
	// with each failure in a row.
	RetryMin, RetryMax time.Duration
	// History is how many scaling decisions are kept for status.
	History int
}

// DefaultScalerConfig suits local processes and a Kubernetes StatefulSet.
func DefaultScalerConfig() ScalerConfig {
	return ScalerConfig{JoinTimeout: 2 * time.Minute, CallTimeout: time.Minute, RetryMin: 5 * time.Second, RetryMax: 2 * time.Minute, History: 50}
}

// Validate reports a setting that cannot work.
func (c ScalerConfig) Validate() error {
	if c.JoinTimeout <= 0 || c.CallTimeout <= 0 || c.RetryMin <= 0 || c.RetryMax < c.RetryMin || c.History < 1 {
		return fmt.Errorf("control: scaler timings must be positive with retry max ≥ retry min: %+v", c)
	}
	return nil
}

// Decommissioner starts draining a node (drain) or stops draining it
// (!drain: it takes replicas again); placement moves the replicas. The
// server decommissions through the meta range; the simulator marks its
// model's node.
type Decommissioner interface {
	Decommission(ctx context.Context, node uint64, drain bool) error
}

// Recommender is implemented by an actuator that only recommends: nothing
// joins or leaves because of it, so nothing is waited for.
type Recommender interface {
	RecommendOnly() bool
}

// Spawn runs f: the server in a goroutine (actuator calls block), the
// simulator at once.
type Spawn func(f func())

// ScaleRecord is one scaling decision or its outcome, for status.
type ScaleRecord struct {
	At                      time.Time
	Action                  string // "scale-out", "scale-in", "scale-out-failed", ...
	NodesBefore, NodesAfter int
	Reason                  string
}

// ScaleView is what the scaler needs of an observation: the live members,
// every node's state and replica count, and where a new node joins.
type ScaleView struct {
	Now      time.Time
	Live     []Member
	States   map[uint64]placement.NodeState
	Replicas map[uint64]int
}

// ViewOf derives the scaler's view from an observation.
func ViewOf(obs Observation) ScaleView {
	v := ScaleView{Now: obs.Now, States: map[uint64]placement.NodeState{}, Replicas: map[uint64]int{}}
	for _, n := range obs.Nodes {
		v.States[n.ID] = n.State
		if n.State == placement.NodeLive {
			v.Live = append(v.Live, Member{ID: n.ID, Addr: obs.Signals[n.ID].Addr})
		}
	}
	for _, r := range obs.Ranges {
		for _, rep := range r.Replicas {
			v.Replicas[rep.Node]++
		}
	}
	return v
}

// drain is a node a scale-in drains, since its decommission was accepted.
type drain struct {
	m  Member
	at time.Time
}

// Scaler carries out scaling actions through an Actuator: at most one at a
// time (a scale-in may be planned to overlap earlier drains), each followed
// to its end (nodes joined live; a drained node removed), failures
// retried after a back-off. Safe for concurrent use.
type Scaler struct {
	cfg   ScalerConfig
	act   Actuator
	dec   Decommissioner
	spawn Spawn
	sink  EventSink

	mu       sync.Mutex
	calling  bool      // an actuator or decommission call is running
	outWant  int       // live nodes a scale-out waits for (0: none pending)
	outCount int       // nodes that scale-out asked for
	outSince time.Time // when it was asked
	drains   []drain   // the nodes scale-ins drain, in the order they began
	fails    int
	retryAt  time.Time
	history  []ScaleRecord
}

// NewScaler acts through act and dec.
func NewScaler(cfg ScalerConfig, act Actuator, dec Decommissioner, spawn Spawn, sink EventSink) *Scaler {
	return &Scaler{cfg: cfg, act: act, dec: dec, spawn: spawn, sink: sink}
}

// SetActuator replaces the actuator (a policy change); work in progress is
// followed with the new one.
func (s *Scaler) SetActuator(act Actuator) {
	s.mu.Lock()
	s.act = act
	s.mu.Unlock()
}

// Pending is the nodes asked for and not yet live, and the nodes being
// drained: the planner counts neither as capacity nor asks again for them.
func (s *Scaler) Pending() (out, in int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outWant > 0 {
		out = s.outCount
	}
	return out, len(s.drains)
}

// History returns the recent scaling records, oldest first.
func (s *Scaler) History() []ScaleRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history)
}

// Round follows the work in progress in v and starts a, if there is no
// work in progress (or a is a scale-in meant to overlap the drains under
// way) and no back-off running.
func (s *Scaler) Round(a ScaleAction, v ScaleView) {
	s.mu.Lock()
	call := s.follow(v)
	if call == nil && a.Kind == ScaleOut && len(s.drains) > 0 && !s.calling {
		// The load rose while nodes drain: keeping one is the fastest
		// capacity there is.
		call = s.cancelScaleIn(a, v)
	}
	// Work in progress is waited for, except by a scale-in planned to
	// overlap the drains under way, once the view shows every one of
	// them draining: before, the plan counted their nodes as serving.
	idle := s.outWant == 0 && (len(s.drains) == 0 || a.Kind == ScaleIn && a.Overlap && s.drainsSeen(v))
	if call == nil && a.Kind != ScaleNone && !s.calling && idle && !v.Now.Before(s.retryAt) {
		switch a.Kind {
		case ScaleOut:
			call = s.scaleOut(a, v)
		case ScaleIn:
			call = s.scaleIn(a, v)
		}
	}
	if call != nil {
		s.calling = true
	}
	s.mu.Unlock()
	if call != nil {
		// Outside mu: the call takes it again when it ends, and may run
		// inline (the simulator).
		s.spawn(call)
	}
}

// drainsSeen reports whether v shows no node of a drain under way live
// (caller holds mu).
func (s *Scaler) drainsSeen(v ScaleView) bool {
	for _, d := range s.drains {
		if v.States[d.m.ID] == placement.NodeLive {
			return false
		}
	}
	return true
}

// follow advances a pending scale-out (joined, or timed out) and the
// drains; it returns the call that removes a drained node (caller holds
// mu).
func (s *Scaler) follow(v ScaleView) func() {
	live := len(v.Live)
	if s.outWant > 0 {
		switch {
		case live >= s.outWant:
			s.record(v.Now, "scale-out-done", s.outWant-s.outCount, live, fmt.Sprintf("%d node(s) joined and serve", s.outCount))
			s.outWant, s.fails = 0, 0
		case v.Now.Sub(s.outSince) >= s.cfg.JoinTimeout:
			s.failed(v.Now, "scale-out-failed", live, fmt.Sprintf("%d node(s) asked for %v ago did not join live", s.outWant-live, s.cfg.JoinTimeout))
			s.outWant = 0
		}
	}
	if s.calling {
		return nil
	}
	nodes := live
	for _, d := range s.drains {
		if v.States[d.m.ID] != placement.NodeLive {
			nodes++
		}
	}
	kept := s.drains[:0]
	for _, d := range s.drains {
		state, known := v.States[d.m.ID]
		switch {
		case !known || state == placement.NodeDead:
			s.record(v.Now, "scale-in-done", nodes, nodes-1, fmt.Sprintf("node %d is gone", d.m.ID))
			nodes--
		case state == placement.NodeLive && v.Now.Sub(d.at) > s.cfg.CallTimeout:
			// Still live long after its drain was accepted: an operator
			// recommissioned it. The scale-in is over; the planner
			// decides again.
			s.record(v.Now, "scale-in-cancelled", nodes, nodes, fmt.Sprintf("node %d is live again: its drain was cancelled", d.m.ID))
		default:
			kept = append(kept, d)
		}
	}
	s.drains = kept
	// Drained nodes are removed in the order their drains began: a
	// StatefulSet removes its highest ordinal first, which the first
	// scale-in picked (kubernetes.Actuator.Remove refuses any other).
	if len(s.drains) == 0 {
		return nil
	}
	m := s.drains[0].m
	if v.States[m.ID] != placement.NodeDraining || v.Replicas[m.ID] != 0 {
		return nil
	}
	act := s.act
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
		defer cancel()
		line, err := act.Remove(ctx, m)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calling = false
		if err != nil {
			s.failed(v.Now, "scale-in-failed", nodes, fmt.Sprintf("node %d is drained but could not be removed: %v", m.ID, err))
			return
		}
		s.record(v.Now, "scale-in-done", nodes, nodes-1, fmt.Sprintf("node %d drained and removed: %s", m.ID, line))
		s.drains, s.fails = slices.DeleteFunc(s.drains, func(d drain) bool { return d.m.ID == m.ID }), 0
	}
}

// scaleOut returns the call that asks for a.To − a.From nodes (caller
// holds mu).
func (s *Scaler) scaleOut(a ScaleAction, v ScaleView) func() {
	count := a.To - a.From
	if count < 1 {
		return nil
	}
	join := make([]string, 0, len(v.Live))
	for _, m := range v.Live {
		if m.Addr != "" {
			join = append(join, m.Addr)
		}
	}
	live, act := len(v.Live), s.act
	// The nodes count as pending from the call on, not from its answer:
	// the state stored after this round (control.State) then holds the
	// scale-out, and a new meta leaseholder follows it rather than asking
	// again while the call runs.
	if r, ok := act.(Recommender); !ok || !r.RecommendOnly() {
		s.outWant, s.outCount, s.outSince = live+count, count, v.Now
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
		defer cancel()
		line, err := act.ScaleOut(ctx, count, join)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calling = false
		if err != nil {
			s.outWant = 0
			s.failed(v.Now, "scale-out-failed", live, fmt.Sprintf("%s; the actuator refused: %v", a.Reason, err))
			return
		}
		s.record(v.Now, "scale-out", a.From, a.To, fmt.Sprintf("%s; %s", a.Reason, line))
	}
}

// scaleIn picks the node to drain and returns the call that decommissions
// it (caller holds mu).
func (s *Scaler) scaleIn(a ScaleAction, v ScaleView) func() {
	victim, err := s.act.Victim(v.Live)
	if err != nil {
		s.failed(v.Now, "scale-in-failed", len(v.Live), fmt.Sprintf("%s; no node may leave: %v", a.Reason, err))
		return nil
	}
	if r, ok := s.act.(Recommender); ok && r.RecommendOnly() {
		s.record(v.Now, "scale-in", a.From, a.To, fmt.Sprintf("%s; recommended: drain node %d", a.Reason, victim.ID))
		return nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
		defer cancel()
		err := s.dec.Decommission(ctx, victim.ID, true)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calling = false
		if err != nil {
			s.failed(v.Now, "scale-in-failed", len(v.Live), fmt.Sprintf("%s; decommission of node %d failed: %v", a.Reason, victim.ID, err))
			return
		}
		s.record(v.Now, "scale-in", a.From, a.To, fmt.Sprintf("%s; draining node %d, removed once it holds nothing", a.Reason, victim.ID))
		s.drains = append(s.drains, drain{m: victim, at: v.Now})
	}
}

// cancelScaleIn returns the call that recommissions the node the last
// scale-in drains (caller holds mu).
func (s *Scaler) cancelScaleIn(a ScaleAction, v ScaleView) func() {
	m, live := s.drains[len(s.drains)-1].m, len(v.Live)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
		defer cancel()
		err := s.dec.Decommission(ctx, m.ID, false)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calling = false
		if err != nil {
			s.failed(v.Now, "scale-in-failed", live, fmt.Sprintf("%s; node %d could not be kept: %v", a.Reason, m.ID, err))
			return
		}
		s.record(v.Now, "scale-in-cancelled", live, live+1, fmt.Sprintf("%s; node %d stops draining and serves again", a.Reason, m.ID))
		s.drains = slices.DeleteFunc(s.drains, func(d drain) bool { return d.m.ID == m.ID })
	}
}

// failed records a failure and backs off (caller holds mu).
func (s *Scaler) failed(now time.Time, action string, nodes int, reason string) {
	s.fails++
	wait := retry.Backoff(s.fails, s.cfg.RetryMin, s.cfg.RetryMax)
	s.retryAt = now.Add(wait)
	s.record(now, action, nodes, nodes, fmt.Sprintf("%s (retry in %v)", reason, wait))
}

// record keeps a decision and reports it as an event (caller holds mu).
func (s *Scaler) record(now time.Time, action string, before, after int, reason string) {
	s.history = append(s.history, ScaleRecord{At: now, Action: action, NodesBefore: before, NodesAfter: after, Reason: reason})
	if over := len(s.history) - s.cfg.History; over > 0 {
		s.history = s.history[over:]
	}
	s.sink.Event(Event{Kind: action, Subject: "cluster", Reason: reason})
}
