package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The offset monitor end to end, through each node's injectable clock (the
// one the skew fault sets). Skews within the bound change nothing: two
// nodes at once at ±0.4 × max offset, so they differ by the 0.8 × the
// monitor tolerates (the chaos schedules skew one node at a time within
// ±max offset / 2). A node skewed past the max offset refuses leases, hands
// them to the others, who serve, and says why; its time does not follow the
// step, so its timestamps stay near the others'; healed, it is trusted
// again.
func TestSkewedNodeGivesUpLeases(t *testing.T) {
	key := []byte("clock-key")
	tc, clocks, c, ctx := startSkewable(t, key)
	leaseholder := func() int { return tc.leaseholderOf(key) }
	untrusted := func() []uint64 {
		var out []uint64
		for _, s := range tc.nodes {
			if s.Store().ClockUntrusted() != "" {
				out = append(out, s.NodeID())
			}
		}
		return out
	}

	maxOffset := tc.cfgs[0].Raft.MaxClockOffset
	bound := maxOffset / 5 * 2
	clocks[0].Set(bound)
	clocks[1].Set(-bound)
	// Every node measures every peer within an offset estimate's lifetime.
	eventually(t, 5*time.Second, "offset estimates", func() error {
		for _, s := range tc.nodes {
			if h := s.clock.Health(); h.Known != 2 {
				return fmt.Errorf("node %d has estimates for %d peers", s.NodeID(), h.Known)
			}
		}
		return nil
	})
	holder := leaseholder()
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if u := untrusted(); len(u) > 0 {
			t.Fatalf("skews within ±%v (max offset %v) left nodes %v untrusted: %s", bound, maxOffset, u, tc.nodes[0].Store().ClockUntrusted())
		}
	}
	if got := leaseholder(); got != holder {
		t.Fatalf("the lease moved from node %d to %d under skews within the bound", holder+1, got+1)
	}

	// Past the bound: the leaseholder's clock runs four max offsets ahead.
	skewed := tc.nodes[holder]
	clocks[0].Set(0)
	clocks[1].Set(0)
	clocks[holder].Set(4 * maxOffset)
	eventually(t, 10*time.Second, "the skewed node gives up its leases", func() error {
		if skewed.Store().ClockUntrusted() == "" {
			return fmt.Errorf("node %d's clock is still trusted", skewed.NodeID())
		}
		for _, r := range skewed.Store().Replicas() {
			if r.IsLeader() {
				return fmt.Errorf("node %d still leads range %d", skewed.NodeID(), r.RangeID())
			}
		}
		if u := untrusted(); len(u) != 1 {
			return fmt.Errorf("untrusted nodes %v, want only %d", u, skewed.NodeID())
		}
		return nil
	})
	if err := c.Put(ctx, key, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, key); err != nil || string(v) != "v2" {
		t.Fatalf("read after the lease moved: %q, %v", v, err)
	}
	if got := leaseholder(); got < 0 || got == holder {
		t.Fatalf("leaseholder is node index %d, want another than the skewed %d", got, holder)
	}
	// It said so, and the others refused its timestamps rather than adopt them.
	eventually(t, 5*time.Second, "metrics", func() error {
		if u, off := metricSum(t, skewed, "tidekv_clock_untrusted"), metricSum(t, tc.nodes[(holder+1)%3], "tidekv_clock_offset_seconds"); u != 1 || off < 2*maxOffset.Seconds() {
			return fmt.Errorf("the skewed node exports tidekv_clock_untrusted %v, a peer's offsets add up to %vs", u, off)
		}
		return nil
	})
	if !hasEvent(skewed, "clock-untrusted", "holding no leases") {
		t.Error("no clock-untrusted event on the skewed node")
	}
	// Its time did not follow the step (raftstore.SteadyClock): its
	// timestamps stayed within the max offset of real time, so the others
	// had none of its to refuse (a transaction it coordinated would
	// otherwise have written in the future, unseen by readers that began
	// after it was acknowledged).
	if ahead := time.Duration(skewed.Store().HLC().Now().WallTime - time.Now().UnixNano()); ahead > maxOffset {
		t.Errorf("the skewed node's HLC runs %v ahead, want within the max offset %v", ahead, maxOffset)
	}
	for _, s := range tc.nodes {
		if n := metricSum(t, s, "tidekv_clock_remote_refused_total"); s != skewed && n != 0 {
			t.Errorf("node %d refused %v of the skewed node's timestamps, want none: its time must not follow the step", s.NodeID(), n)
		}
	}
	if !hasEvent(skewed, "clock-step", "keeps to the monotonic clock") {
		t.Error("no clock-step event on the skewed node")
	}
	// And no lease goes back to it.
	if err := c.TransferLease(ctx, skewed.Store().LookupKey(key).RangeID(), skewed.NodeID()); err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("lease transfer to the skewed node: %v, want a refusal", err)
	}

	clocks[holder].Set(0)
	eventually(t, 10*time.Second, "the healed node is trusted again", func() error {
		if u := untrusted(); len(u) > 0 {
			return fmt.Errorf("untrusted nodes %v", u)
		}
		return nil
	})
	if !hasEvent(skewed, "clock-trusted", "again") {
		t.Error("no clock-trusted event on the healed node")
	}
}

func hasEvent(s *Server, kind, text string) bool {
	for _, e := range s.events.List(0) {
		if e.GetKind() == kind && strings.Contains(e.GetReason(), text) {
			return true
		}
	}
	return false
}

// metricSum adds up a metric's series on a node.
func metricSum(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.metrics.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// A leaseholder whose wall clock jumps beyond the max offset must not
// write in the future in the moments before its offset monitor notices: a
// write it acknowledged is read by a transaction that begins afterwards
// through another node, whose clock is right. Before the node's time kept
// to the monotonic clock across steps (raftstore.SteadyClock), the write
// landed a second ahead and the reader, at its node's time, missed it.
func TestClockStepCannotHideAnAcknowledgedWrite(t *testing.T) {
	key := []byte("step-key")
	tc, clocks, _, ctx := startSkewable(t, key)
	holder := tc.leaseholderOf(key)
	if holder < 0 {
		t.Fatal("no leaseholder for the key")
	}
	// Each client talks to one node only, so neither carries the other's
	// clock readings.
	through := func(i int) *client.Client {
		return tc.client(func(cfg *client.Config) { cfg.Addrs = []string{tc.nodes[i].Addr()} })
	}
	writer, reader := through(holder), through((holder+1)%3)

	clocks[holder].Set(4 * tc.cfgs[0].Raft.MaxClockOffset)
	if err := writer.Put(ctx, key, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := reader.Txn(ctx, func(tx *client.Tx) error {
		v, err := tx.Get(ctx, key)
		got = v
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != "v2" {
		t.Fatalf("a transaction begun after v2 was acknowledged read %q through another node: the skewed leaseholder wrote in the future", got)
	}
}

// startSkewable starts three nodes, each on a wall clock of its own to
// skew, waits until every range has three voters and writes key=v1; ctx
// lasts a minute.
func startSkewable(t *testing.T, key []byte) (*testCluster, []*raftstore.SkewClock, *client.Client, context.Context) {
	var clocks []*raftstore.SkewClock
	tc := startClusterWith(t, 3, func(c *Config) {
		clk := &raftstore.SkewClock{}
		clocks = append(clocks, clk)
		c.Raft.Clock = clk
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if err := c.Put(ctx, key, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	return tc, clocks, c, ctx
}

// leaseholderOf is the index of the node leading key's range, -1 if none.
func (tc *testCluster) leaseholderOf(key []byte) int {
	for i, s := range tc.nodes {
		if r := s.Store().LookupKey(key); r != nil && r.IsLeader() {
			return i
		}
	}
	return -1
}
