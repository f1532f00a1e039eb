package server

import (
	"context"
	"reflect"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The elasticity controller's state (control.State) lives in the meta
// range so that it survives a move of the meta lease: the leaseholder
// stores it each Control.StateEvery, and in the round a scale operation
// starts or ends; a node that acquires the meta lease resumes from it
// before its first round (docs/design.md).

// ctlStore is the control state's bookkeeping, under controlState.mu.
type ctlStore struct {
	resume  bool                 // the lease was acquired: resume before the next round
	savedAt time.Time            // when the state was last stored
	scaler  *control.ScalerState // the scale operation last stored
	failed  bool                 // the last store failed (reported once)
}

// resuming says whether the next round must first resume the stored state.
func (c *controlState) resuming() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store.resume
}

// readControllerState reads the stored state once the meta lease may be
// read from (nil: none stored).
func (s *Server) readControllerState(ctx context.Context, meta *raftstore.Replica) ([]byte, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	return raftstore.ReadMetaControllerState(s.eng)
}

// resumeLocked resumes the autoscaler from raw (caller holds mu, after
// applyAutoscale so the scaler that follows a pending operation exists).
// A state it cannot take is reported and the controller starts afresh;
// it is overwritten at the next store.
func (c *controlState) resumeLocked(s *Server, raw []byte, now time.Time) {
	c.store = ctlStore{}
	if raw == nil {
		return
	}
	st, err := control.DecodeState(raw)
	if err == nil {
		err = c.loop.Autoscaler.Restore(st)
	}
	if err != nil {
		s.events.Record("controller-state", "cluster", "the stored elasticity controller state was not resumed, the controller starts afresh: %v", err)
		return
	}
	s.events.Record("controller-state", "cluster", "resumed the elasticity controller: %d forecaster samples, %d node(s) pending to join",
		st.Planner.Forecaster.Samples, pendingOut(st.Scaler))
	c.store.savedAt, c.store.scaler = now, st.Scaler
}

func pendingOut(sc *control.ScalerState) int {
	if sc == nil || sc.OutWant == 0 {
		return 0
	}
	return sc.OutCount
}

// stateToSaveLocked returns the state to store after this round, if it
// is due (caller holds mu).
func (c *controlState) stateToSaveLocked(s *Server, now time.Time) *control.State {
	if s.store.LogVersion() < raftstore.LogVersionControllerState {
		return nil // an older binary would refuse the entry: kept in memory only until the upgrade ends
	}
	st := c.loop.Autoscaler.Snapshot()
	if now.Sub(c.store.savedAt) < s.cfg.Control.StateEvery && reflect.DeepEqual(st.Scaler, c.store.scaler) {
		return nil
	}
	return &st
}

// saveControllerState stores st through the meta range's log.
func (s *Server) saveControllerState(ctx context.Context, meta *raftstore.Replica, st *control.State, now time.Time) {
	raw, err := control.EncodeState(*st)
	if err == nil {
		_, err = meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{PutControllerState: raw})
	}
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	if err != nil {
		if !s.ctl.store.failed {
			s.events.Record("controller-state", "cluster", "storing the elasticity controller state failed (retried next round): %v", err)
		}
		s.ctl.store.failed = true
		return
	}
	s.ctl.store.savedAt, s.ctl.store.scaler, s.ctl.store.failed = now, st.Scaler, false
}
