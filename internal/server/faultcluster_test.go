package server

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/transport"
)

// Faults on an in-process test cluster: the controls /debug/faults drives
// in chaos runs (a Raft partition and a skewable wall clock per node), a
// kill and restart of a node, and the placement changes an operator or the
// placement controller makes (splits, merges, replica moves, lease
// transfers), each done once and checked done.

// faultNodes holds each node's partition and clock, in node order.
type faultNodes struct {
	parts  []*transport.Partition
	clocks []*raftstore.SkewClock
}

// adjust gives a node's config its fault controls (for startClusterWith,
// which configures the nodes in order).
func (f *faultNodes) adjust(c *Config) {
	p, clk := &transport.Partition{}, &raftstore.SkewClock{}
	f.parts, f.clocks = append(f.parts, p), append(f.clocks, clk)
	c.Transport.Partition, c.Raft.Clock = p, clk
}

// skew sets node i's wall clock d off and waits until the node's time
// follows it, as it does once its offset monitor finds the stepped clock
// within the tolerance of the peers' (raftstore.SteadyClock).
func (f *faultNodes) skew(t *testing.T, tc *testCluster, i int, d time.Duration) {
	t.Helper()
	f.clocks[i].Set(d)
	eventually(t, 10*time.Second, "the node's time to follow its clock's step", func() error {
		if off := time.Until(tc.nodes[i].Store().Now()); (off - d).Abs() > 20*time.Millisecond {
			return fmt.Errorf("node %d's time is %v off, its wall clock %v", tc.nodes[i].NodeID(), off, d)
		}
		return nil
	})
}

// heal removes every partition and skew.
func (f *faultNodes) heal() {
	for i := range f.parts {
		f.parts[i].Heal()
		f.clocks[i].Set(0)
	}
}

// kill stops node i as a killed process stops, at one instant: its Raft
// traffic is cut first, so it acknowledges nothing more, then its clients'
// calls are cut off mid-flight (no graceful drain), and what its engine
// holds at that instant is what it restarts on (restartOn). A process's
// death loses no write that reached the OS, so every committed batch is
// kept; losing unsynced ones is a power loss (raftstore's
// powerloss_test.go).
func (tc *testCluster) kill(i int, part *transport.Partition) *storage.MemEngine {
	s := tc.nodes[i]
	part.Isolate()
	s.ports.grpc.Stop()
	mem := s.ks.Base().(*storage.MemEngine)
	left := mem.CrashCloneKeeping(mem.UnsyncedBatches())
	s.Stop()
	part.Heal()
	return left
}

// restartOn starts node i again on eng at its old address (peers and
// clients know it by that).
func (tc *testCluster) restartOn(ctx context.Context, i int, eng storage.Engine) {
	tc.t.Helper()
	cfg := tc.cfgs[i]
	cfg.GRPCAddr = tc.nodes[i].Addr()
	cfg.engine = eng
	s, err := Start(ctx, cfg)
	if err != nil {
		tc.t.Fatalf("restart node %d: %v", i+1, err)
	}
	tc.nodes[i] = s
}

// rangeAt returns the directory's range holding key.
func rangeAt(ctx context.Context, c *client.Client, key []byte) (*tidekvpb.RangeDescriptor, error) {
	resp, err := c.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		if bytes.Compare(d.GetStartKey(), key) <= 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(key, d.GetEndKey()) < 0) {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no range holds %q", key)
}

// moveAnyReplica moves the replica of rangeID off a voter that does not hold
// its lease onto a node without one, and returns the two nodes.
func (tc *testCluster) moveAnyReplica(ctx context.Context, t *testing.T, c *client.Client, rng *rand.Rand, rangeID uint64) (from, to uint64, err error) {
	d, err := dirDesc(ctx, c, rangeID)
	if err != nil {
		return 0, 0, err
	}
	holder := tc.leaseholder(t, rangeID)
	var off []uint64
	for _, n := range voterNodes(d) {
		if n != holder {
			off = append(off, n)
		}
	}
	if len(off) == 0 {
		return 0, 0, fmt.Errorf("range %d has no voter but its leaseholder: %v", rangeID, d)
	}
	from, to = off[rng.Intn(len(off))], tc.nodeWithout(t, d)
	_, err = c.ChangeReplicas(ctx, rangeID, to, from)
	return from, to, err
}

// transferLease moves rangeID's lease to another of its voters and
// returns it.
func (tc *testCluster) transferLease(ctx context.Context, t *testing.T, c *client.Client, rng *rand.Rand, rangeID uint64) (uint64, error) {
	d, err := dirDesc(ctx, c, rangeID)
	if err != nil {
		return 0, err
	}
	holder := tc.leaseholder(t, rangeID)
	others := slices.DeleteFunc(voterNodes(d), func(n uint64) bool { return n == holder })
	if len(others) == 0 {
		return 0, fmt.Errorf("range %d has no other voter: %v", rangeID, d)
	}
	to := others[rng.Intn(len(others))]
	return to, c.TransferLease(ctx, rangeID, to)
}

// mergeAt merges the range that ends at key with the one that starts
// there, first moving the right one's replicas onto the left one's nodes
// (a merge needs both on the same nodes); it returns the moves made.
func (tc *testCluster) mergeAt(ctx context.Context, t *testing.T, c *client.Client, key []byte) (moves int, err error) {
	resp, err := c.Ranges(ctx)
	if err != nil {
		return 0, err
	}
	var left, right *tidekvpb.RangeDescriptor
	for _, ri := range resp.GetRanges() {
		switch d := ri.GetDesc(); {
		case bytes.Equal(d.GetEndKey(), key):
			left = d
		case bytes.Equal(d.GetStartKey(), key):
			right = d
		}
	}
	if left == nil || right == nil {
		return 0, fmt.Errorf("no range boundary at %q", key)
	}
	for {
		lv, rv := voterNodes(left), voterNodes(right)
		add := slices.DeleteFunc(slices.Clone(lv), func(n uint64) bool { return slices.Contains(rv, n) })
		rm := slices.DeleteFunc(slices.Clone(rv), func(n uint64) bool { return slices.Contains(lv, n) })
		if len(add) == 0 && len(rm) == 0 {
			break
		}
		if len(add) == 0 || len(rm) == 0 {
			return moves, fmt.Errorf("ranges %d and %d have voters %v and %v", left.GetRangeId(), right.GetRangeId(), lv, rv)
		}
		if tc.leaseholder(t, right.GetRangeId()) == rm[0] {
			if err := c.TransferLease(ctx, right.GetRangeId(), slices.DeleteFunc(slices.Clone(rv), func(n uint64) bool { return n == rm[0] })[0]); err != nil {
				return moves, err
			}
		}
		if right, err = c.ChangeReplicas(ctx, right.GetRangeId(), add[0], rm[0]); err != nil {
			return moves, err
		}
		moves++
	}
	// Merge as the placement controller does (Admin.Merge). The controller
	// also finishes any merge whose right range it finds frozen, so it may
	// run this one beside us, and the loser of that race waits out a
	// freeze the winner's merge consumed and fails, up to 20 s later: the
	// directory, not the answer, says whether the ranges merged. The call
	// ends with ctx; one cut short leaves the right range frozen, and the
	// controller finishes the merge.
	res := make(chan error, 1)
	go func() {
		_, err := (&adminService{s: tc.nodes[0]}).Merge(ctx, &tidekvpb.MergeRequest{LeftRangeId: left.GetRangeId(), Reason: "test"})
		res <- err
	}()
	for {
		select {
		case err := <-res:
			if err != nil && !mergedAt(ctx, c, key, 5*time.Second) {
				return moves, err
			}
			return moves, nil
		case <-time.After(200 * time.Millisecond):
			if mergedAt(ctx, c, key, 0) {
				return moves, nil
			}
		case <-ctx.Done():
			return moves, ctx.Err()
		}
	}
}

// mergedAt polls the directory for up to wait (at least once) until no
// range starts at key.
func mergedAt(ctx context.Context, c *client.Client, key []byte, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, max(wait, time.Second))
	defer cancel()
	for end := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		if d, err := rangeAt(ctx, c, key); err == nil && !bytes.Equal(d.GetStartKey(), key) {
			return true
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return false
		}
	}
}

// retryFault runs a fault until it succeeds, for up to d: one may race
// another's effects (a split while a lease moves, a range changed under a
// move), and is then made again on the new layout.
func retryFault(t *testing.T, d time.Duration, name string, f func() (string, error)) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		what, err := f()
		if err == nil {
			return what
		}
		if time.Now().After(deadline) {
			t.Fatalf("fault %s: not done within %v: %v", name, d, err)
		}
		t.Logf("fault %s: %v; again", name, err)
		time.Sleep(100 * time.Millisecond)
	}
}
