package server

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// A merge's coordinator proposes the merge only once every replica of the
// right range has applied its freeze. A replica that applied the freeze
// and then the unfreeze of another coordinator, which gave up, is at a
// later generation and not frozen: WaitFrozen must not take it as frozen.
// It did ("generation at least the frozen one"), and in a chaos schedule
// (docs/benchmarks/chaos.md, seed 44) placement's second run of a merge
// the nemesis had given up proposed it on an unfrozen range, and every
// replica of the left range exited.
func TestWaitFrozenRefusesAnUnfrozenRange(t *testing.T) {
	tc := startClusterWith(t, 3, nil)
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := []byte("wf/k")
	for _, k := range []string{"wf/", "wf/k"} {
		if _, err := c.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	tc.waitReplicated(c, 3)
	var left, right *tidekvpb.RangeDescriptor
	eventually(t, 10*time.Second, "both ranges in the directory", func() error {
		var err error
		if left, err = rangeAt(ctx, c, []byte("wf/a")); err != nil {
			return err
		}
		if right, err = rangeAt(ctx, c, key); err == nil && !bytes.Equal(right.GetStartKey(), key) {
			err = fmt.Errorf("the range at %q is %v", key, right)
		}
		return err
	})
	s := tc.nodes[0]
	// Placement finishes any merge it finds half done (resumeMerges), so
	// left running it would merge the range frozen here by hand before the
	// test unfreezes it (CI on 2026-12-06 saw exactly that). Its rounds
	// wait while the test holds every node's controller.
	defer tc.holdControl()()
	frozen, err := s.rangeOps().FreezeRange(ctx, &tidekvpb.FreezeRangeRequest{RangeId: right.GetRangeId(), Into: left.GetRangeId()})
	if err != nil {
		t.Fatal(err)
	}
	// Read from the stores, not through WaitFrozen, which is what is
	// tested.
	replicasAre := func(what string, into uint64) {
		eventually(t, 10*time.Second, what, func() error {
			for _, rd := range frozen.GetReplicas() {
				if r := tc.server(rd.GetNodeId()).Store().GetReplica(right.GetRangeId()); r == nil || r.Desc().GetMergingInto() != into {
					return fmt.Errorf("node %d's replica is not yet %s", rd.GetNodeId(), what)
				}
			}
			return nil
		})
	}
	replicasAre("frozen", left.GetRangeId())
	// While frozen, WaitFrozen takes it: so the refusal below is about the
	// generation, not a wait that could never succeed.
	if err := s.rangeOps().WaitFrozen(ctx, frozen); err != nil {
		t.Fatalf("WaitFrozen refused the frozen range: %v", err)
	}
	if _, err := s.rangeOps().FreezeRange(ctx, &tidekvpb.FreezeRangeRequest{RangeId: right.GetRangeId(), Unfreeze: true}); err != nil {
		t.Fatal(err)
	}
	replicasAre("unfrozen", 0)
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	if err := s.rangeOps().WaitFrozen(wctx, frozen); err == nil {
		t.Fatalf("WaitFrozen took the unfrozen range %d (generation %d) as frozen at generation %d", right.GetRangeId(),
			tc.server(frozen.GetReplicas()[0].GetNodeId()).Store().GetReplica(right.GetRangeId()).Desc().GetGeneration(), frozen.GetGeneration())
	}
}
