package ctlloop

import (
	"context"
	"reflect"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The elasticity controller's state (control.State) lives in the meta
// range so that it survives a move of the meta lease: the leaseholder
// stores it each Control.StateEvery, and in the round a scale operation
// starts or ends; a node that acquires the meta lease resumes from it
// before its first round (docs/design.md).

// store is the control state's bookkeeping, under Loop.mu.
type store struct {
	resume  bool                 // the lease was acquired: resume before the next round
	savedAt time.Time            // when the state was last stored
	scaler  *control.ScalerState // the scale operation last stored
	failed  bool                 // the last store failed (reported once)
}

// resuming says whether the next round must first resume the stored state.
func (c *Loop) resuming() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store.resume
}

// resumeLocked resumes the autoscaler from raw (caller holds mu, after
// applyAutoscale so the scaler that follows a pending operation exists).
// A state it cannot take is reported and the controller starts afresh;
// it is overwritten at the next store.
func (c *Loop) resumeLocked(raw []byte, now time.Time) {
	c.store = store{}
	if raw == nil {
		return
	}
	st, err := control.DecodeState(raw)
	if err == nil {
		err = c.loop.Autoscaler.Restore(st)
	}
	if err != nil {
		c.node.Record("controller-state", "cluster", "the stored elasticity controller state was not resumed, the controller starts afresh: %v", err)
		return
	}
	c.node.Record("controller-state", "cluster", "resumed the elasticity controller: %d forecaster samples, %d node(s) pending to join",
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
func (c *Loop) stateToSaveLocked(now time.Time) *control.State {
	if !c.node.StoresState() {
		return nil // kept in memory only until the upgrade ends
	}
	st := c.loop.Autoscaler.Snapshot()
	if now.Sub(c.store.savedAt) < c.d.Control.StateEvery && reflect.DeepEqual(st.Scaler, c.store.scaler) {
		return nil
	}
	return &st
}

// saveState stores st through the meta range's log.
func (c *Loop) saveState(ctx context.Context, meta *raftstore.Replica, st *control.State, now time.Time) {
	raw, err := control.EncodeState(*st)
	if err == nil {
		err = c.node.SaveState(ctx, meta, raw)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if !c.store.failed {
			c.node.Record("controller-state", "cluster", "storing the elasticity controller state failed (retried next round): %v", err)
		}
		c.store.failed = true
		return
	}
	c.store.savedAt, c.store.scaler, c.store.failed = now, st.Scaler, false
}
