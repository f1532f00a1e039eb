package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The control loop (internal/control) runs on the meta range's
// leaseholder. Every Control.Interval this node observes the cluster from
// the range directory, the range reports and the node heartbeats, and hands
// the observation to the loop; the loop's runner executes operators through
// opExecutor, i.e. the same range operations an operator's ctl commands
// run.

// controlState is the server's handle on the control loop. The loop's
// controller is not safe for concurrent use: mu serialises rounds, resets
// and status reads.
type controlState struct {
	mu           sync.Mutex
	loop         *control.Loop
	actuatorName string // the autoscaler's actuator ("": none yet)
	store        ctlStore
	// wake asks for a placement round before the next (wakePlace).
	wake chan struct{}
}

func newControlState(s *Server) *controlState {
	sink := eventSink{s}
	runner := control.NewRunner(s.cfg.Control.Runner, opExecutor{s}, time.Now, sink)
	return &controlState{wake: make(chan struct{}, 1), loop: &control.Loop{
		Controller: control.NewController(s.cfg.Control, s.cfg.Placement),
		Runner:     runner,
		Sink:       sink,
		Autoscaler: control.NewAutoscaler(s.cfg.Autoscale, s.cfg.Control.Interval, nil, runner, sink),
	}}
}

// reset forgets the controller's soft state (the meta lease was acquired);
// the elasticity controller's is resumed from the meta range instead.
func (c *controlState) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loop.Controller.Reset()
	c.store.resume = true
}

// phaseOf returns a node's bootstrap phase.
func (s *Server) phaseOf(node uint64) placement.Phase {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	return s.ctl.loop.Controller.Phase(node)
}

// placeLoop runs a control round every Control.Interval, and a
// placement-only round when woken, at most one per SizeWatchInterval so a
// burst of reports cannot keep the loop busy.
func (s *Server) placeLoop() {
	s.bg.Wakeable(s.cfg.Control.Interval, s.cfg.SizeWatchInterval, s.ctl.wake, s.place, s.placeUrgent)
}

// wakePlace asks the control loop for an early placement round.
func (s *Server) wakePlace() {
	select {
	case s.ctl.wake <- struct{}{}:
	default: // a round is already due
	}
}

// place runs one control round if this node holds the meta lease.
func (s *Server) place(ctx context.Context) { s.placeRound(ctx, false) }

// placeUrgent runs placement alone, woken between rounds (sizewatch.go).
func (s *Server) placeUrgent(ctx context.Context) { s.placeRound(ctx, true) }

func (s *Server) placeRound(ctx context.Context, urgent bool) {
	meta := s.metaLeader()
	if meta == nil || s.liveNodes() == nil {
		return // not leaseholder, or liveness still being learnt
	}
	resp, err := s.metaRange().Ranges(ctx, meta)
	if err != nil {
		return
	}
	var stored []byte
	resume := !urgent && s.ctl.resuming()
	if resume {
		if stored, err = s.readControllerState(ctx, meta); err != nil {
			return // not readable yet: the round waits, so a fresh state is never stored over it
		}
	}
	now := time.Now()
	obs := s.meta.Observe(s.nodeID, meta.Desc(), resp, s.nodeStatuses(resp.GetNodes(), now), now)
	s.placeKeySpaces(&obs)
	cfg := s.clusterConfig()
	s.ctl.mu.Lock()
	s.ctl.loop.Controller.SetPolicy(cfg.Placement)
	if urgent {
		s.ctl.loop.Urgent(obs)
		s.ctl.mu.Unlock()
		return
	}
	s.ctl.applyAutoscale(s, cfg.Autoscale)
	if resume {
		s.ctl.resumeLocked(s, stored, obs.Now)
	}
	s.ctl.loop.Round(obs)
	s.exportOverflow()
	save := s.ctl.stateToSaveLocked(s, obs.Now)
	s.ctl.mu.Unlock()
	if save != nil {
		s.saveControllerState(ctx, meta, save, obs.Now)
	}
}

// exportOverflow exports the overflow policy's view of each key space
// that grows when full.
func (s *Server) exportOverflow() {
	cat := s.ks.Catalogue()
	for _, c := range s.ctl.loop.Autoscaler.Status().Caches {
		if k, ok := cat.ByName(c.Name); ok {
			s.metrics.KeyspacePrelaunch.WithLabelValues(metrics.IDLabel(k.ID)).Set(c.ThresholdBytes)
			s.metrics.KeyspaceFullest.WithLabelValues(metrics.IDLabel(k.ID)).Set(c.FullestBytes)
		}
	}
}

// eventSink records the control loop's events in the node's event log.
type eventSink struct{ s *Server }

func (e eventSink) Event(ev control.Event) { e.s.events.Record(ev.Kind, ev.Subject, "%s", ev.Reason) }

// opExecutor carries out operators through the range operations an
// operator's ctl commands run (rangeops.Ops.Execute, in process), so
// events and checks are the same.
type opExecutor struct{ s *Server }

func (x opExecutor) Execute(op placement.Operator, done func(error)) {
	s := x.s
	s.bg.Go(func() {
		ctx, cancel := s.bg.UntilStop(s.ctl.loop.Runner.Config().OpTimeout)
		defer cancel()
		err := raftstore.ErrStopped
		if s.ready.Load() { // as the admin service refuses before the node serves
			err = s.rangeOps().Execute(ctx, op)
		}
		if errors.Is(err, context.Canceled) {
			err = nil // the node is stopping: nothing to report
		}
		done(err)
	})
}
