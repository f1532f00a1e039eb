package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/placement"
)

// A replica change keeps a range's load sample fresh (issue 36 item 2): a
// learner added bumps the descriptor's generation but not its span, so the
// meta range keeps the leaseholder's rate, fresh, and the next sample runs
// on from the same counters; a split makes the sample stale until a whole
// window has been counted over the new span. Samples and reports are taken
// by hand (ReportAll samples, Report sends at once), control is held.
func TestLoadSampleFreshAcrossReplicaChange(t *testing.T) {
	tc := startClusterWith(t, 2, func(c *Config) {
		c.Placement.ReplicationFactor = 1
		c.ReportInterval = time.Hour
	})
	c := tc.client()
	tc.waitReplicated(c, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	eventually(t, 10*time.Second, "every node a member", func() error {
		for _, s := range tc.nodes {
			if !(rangeNode{tc.nodes[0]}).IsMember(s.NodeID()) {
				return fmt.Errorf("node %d is not yet", s.NodeID())
			}
		}
		return nil
	})
	release := tc.holdControl()
	defer release()

	info := func(id uint64) *tidekvpb.RangeInfo {
		t.Helper()
		resp, err := c.Ranges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ri := range resp.GetRanges() {
			if ri.GetDesc().GetRangeId() == id {
				return ri
			}
		}
		t.Fatalf("no range %d in the directory", id)
		return nil
	}
	var id uint64
	resp, err := c.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ri := range resp.GetRanges() {
		if ri.GetDesc().GetRangeId() != keys.MetaRangeID {
			id = ri.GetDesc().GetRangeId()
		}
	}
	s := tc.server(tc.leaseholder(t, id))
	desc := func() *tidekvpb.RangeDescriptor { return s.Store().GetReplica(id).Desc() }
	reads := func() {
		t.Helper()
		for range 100 {
			if _, err := c.Get(ctx, []byte("k")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// sample takes a window's sample on the leaseholder and reports it.
	sample := func() *tidekvpb.RangeInfo {
		t.Helper()
		s.report.ReportAll(ctx)
		s.report.Report(desc())
		return info(id)
	}
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	sample()
	reads()
	before := sample()
	if before.GetLoadStale() || before.GetQps() <= 0 {
		t.Fatalf("a whole window under one lease: %v, want fresh with a rate", before)
	}

	var other uint64
	for _, n := range tc.nodes {
		if n.NodeID() != s.NodeID() {
			other = n.NodeID()
		}
	}
	done := make(chan error, 1)
	opExecutor{s}.Execute(placement.Operator{Kind: placement.OpAddLearner, Range: id, Target: other, Policy: "test", Reason: "a replica change"},
		func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	gen := desc().GetGeneration()
	if gen <= before.GetDesc().GetGeneration() {
		t.Fatalf("generation %d after adding a learner, was %d", gen, before.GetDesc().GetGeneration())
	}
	s.report.Report(desc())
	if ri := info(id); ri.GetDesc().GetGeneration() != gen || ri.GetLoadStale() || ri.GetQps() != before.GetQps() {
		t.Errorf("right after the learner was added: %v; want generation %d, fresh, %.1f qps as before", ri, gen, before.GetQps())
	}
	reads()
	if ri := sample(); ri.GetLoadStale() || ri.GetQps() <= 0 {
		t.Errorf("the window across the learner's addition: %v, want fresh with a rate", ri)
	}

	if _, err := c.Split(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	s.report.Report(desc())
	if ri := info(id); !ri.GetLoadStale() || ri.GetQps() != 0 {
		t.Errorf("right after a split: %v, want stale with no rate", ri)
	}
	reads() // of the right half: the left one, still led here, serves none
	if ri := sample(); !ri.GetLoadStale() {
		t.Errorf("the window across the split: %v, want stale", ri)
	}
	if ri := sample(); ri.GetLoadStale() {
		t.Errorf("a whole window over the new span: %v, want fresh", ri)
	}
}
