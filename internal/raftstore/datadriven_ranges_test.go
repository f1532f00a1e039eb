package raftstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// The data-driven scenarios' commands that change ranges: splits, replica
// changes, lease transfers, closed timestamps.

func (d *ddDriver) split(t *testing.T, td *datadriven.TestData) string {
	var key string
	td.ScanArgs(t, "key", &key)
	newID := d.uintArg(t, td, "id")
	var resp *tidekvpb.SplitResponse
	err := d.do(t, td, []byte(key), false, func(ctx context.Context, r *Replica) error {
		var err error
		resp, err = r.Split(ctx, []byte(key), newID)
		return err
	})
	if err != nil {
		return fmtErr(err)
	}
	// The new range's first leader is the left's leaseholder when its
	// immediate campaign runs within an election timeout
	// (TestRegressionSplitRangeLeaderless); on a starved machine another
	// replica's election timer may fire first. A script that needs a given
	// leaseholder of the new range says so with transfer-lease.
	return fmtDesc(resp.GetLeft()) + "\n" + fmtDesc(resp.GetRight())
}

func (d *ddDriver) changeReplicas(t *testing.T, td *datadriven.TestData) string {
	rangeID := d.uintArg(t, td, "range")
	var add, remove uint64
	switch td.Cmd {
	case "add-replica", "add-learner":
		add = d.uintArg(t, td, "node")
	case "remove-replica":
		remove = d.uintArg(t, td, "node")
	default:
		td.MaybeScanArgs(t, "add", &add)
		td.MaybeScanArgs(t, "remove", &remove)
	}
	timeout := 20 * time.Second
	if td.HasArg("timeout") {
		var s string
		td.ScanArgs(t, "timeout", &s)
		var err error
		if timeout, err = time.ParseDuration(s); err != nil {
			td.Fatalf(t, "timeout: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		r := d.leaderOf(rangeID)
		var err error
		var desc *tidekvpb.RangeDescriptor
		if r == nil {
			err = &NotLeaderError{RangeID: rangeID}
		} else if td.Cmd == "add-learner" {
			desc, err = r.AddLearner(ctx, add)
		} else {
			desc, err = r.ChangeReplicas(ctx, add, remove)
		}
		var nl *NotLeaderError
		switch {
		case err == nil:
			return fmtDesc(desc)
		case errors.As(err, &nl) && ctx.Err() == nil:
			// Leadership moved (removing the leaseholder hands it away
			// first): ask the new leaseholder.
			time.Sleep(10 * time.Millisecond)
		default:
			return fmtErr(err)
		}
	}
}

func (d *ddDriver) transferLease(t *testing.T, td *datadriven.TestData) string {
	rangeID, node := d.uintArg(t, td, "range"), d.uintArg(t, td, "node")
	// The target may not have applied the split that created the range yet.
	var target *Replica
	if err := d.poll(func() bool {
		if s := d.tc.stores[node]; s != nil {
			target = s.GetReplica(rangeID)
		}
		return target != nil && target.Desc() != nil
	}); err != nil {
		return fmt.Sprintf("n%d holds no replica of r%d", node, rangeID)
	}
	deadline := time.Now().Add(ddTimeout)
	for !target.IsLeader() {
		if time.Now().After(deadline) {
			return fmt.Sprintf("n%d did not take the lease of r%d", node, rangeID)
		}
		if r := d.leaderOf(rangeID); r != nil {
			if err := r.TransferLease(node); err != nil {
				var nl *NotLeaderError
				if !errors.As(err, &nl) {
					return fmtErr(err)
				}
			}
		}
		// Raft gives up a transfer after an election timeout; asking again
		// for the same target while one is running is a no-op.
		time.Sleep(20 * time.Millisecond)
	}
	return "ok"
}

// publishClosed has the range's leaseholder publish its closed timestamps
// to the reachable nodes, as the node's push loop does, and waits until
// every reachable replica of the range has applied the closed index, so
// bounded reads that follow do not depend on apply timing.
func (d *ddDriver) publishClosed(t *testing.T, td *datadriven.TestData) string {
	rangeID := d.uintArg(t, td, "range")
	var ct *tidekvpb.ClosedTimestamp
	var byPeer map[uint64][]*tidekvpb.ClosedTimestamp
	if err := d.poll(func() bool {
		ld := d.leaderOf(rangeID)
		if ld == nil {
			return false
		}
		byPeer = ld.store.ClosedTimestamps(time.Now())
		ct = nil
		for _, cts := range byPeer {
			for _, c := range cts {
				if c.GetRangeId() == rangeID {
					ct = c
				}
			}
		}
		return ct != nil
	}); err != nil {
		return fmt.Sprintf("r%d published no closed timestamp", rangeID)
	}
	for _, id := range d.reachable() {
		d.tc.stores[id].ApplyClosedTimestamps(byPeer[id])
	}
	if err := d.poll(func() bool {
		for _, id := range d.reachable() {
			if r := d.tc.stores[id].GetReplica(rangeID); r != nil && r.applied.Load() < ct.GetIndex() {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Sprintf("the replicas of r%d did not apply the closed index %d", rangeID, ct.GetIndex())
	}
	return "ok"
}

// --- state views -----------------------------------------------------------

// showRanges prints each running node's replicas, sorted by node then range;
// "*" marks the replica that claims the lease.
