package raftstore

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// interrupted-add range=R node=N: the first step of a voter addition (a
// plain learner on N) and nothing more, as a leaseholder that died right
// after it leaves the range. A failed ChangeReplicas rolls its learner
// back, so this state is made by hand.
func (d *ddDriver) interruptedAdd(t *testing.T, td *datadriven.TestData) string {
	rangeID, node := d.uintArg(t, td, "range"), d.uintArg(t, td, "node")
	r := d.leaderOf(rangeID)
	if r == nil {
		return "no leader"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mu := r.store.adminMu(rangeID)
	mu.Lock()
	defer mu.Unlock()
	desc, _, err := r.addLearnerStep(ctx, r.Desc(), node, false)
	if err != nil {
		return fmtErr(err)
	}
	return fmtDesc(desc)
}
