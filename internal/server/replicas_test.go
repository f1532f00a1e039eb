package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/keys"
)

// Replica changes through the Go client on a 4-node cluster with
// replication factor 3: the up-replication loop leaves every range with
// voters on 3 of the 4 nodes, so there is always one node to move a
// replica to.

// eventually polls f until it returns nil, failing the test with f's last
// error after d.
func eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tc *testCluster) server(nodeID uint64) *Server {
	for _, s := range tc.nodes {
		if s != nil && s.NodeID() == nodeID {
			return s
		}
	}
	tc.t.Fatalf("no node %d", nodeID)
	return nil
}

// leaseholder returns the node whose replica of rangeID holds the lease
// (the one local state says, not the directory, which lags).
func (tc *testCluster) leaseholder(t *testing.T, rangeID uint64) uint64 {
	t.Helper()
	var lh uint64
	eventually(t, 10*time.Second, fmt.Sprintf("leaseholder of range %d", rangeID), func() error {
		for _, s := range tc.nodes {
			if r := s.Store().GetReplica(rangeID); r != nil && r.IsLeader() {
				lh = s.NodeID()
				return nil
			}
		}
		return errors.New("no replica leads")
	})
	return lh
}

// nodeWithout returns a node that holds no replica in d.
func (tc *testCluster) nodeWithout(t *testing.T, d *tidekvpb.RangeDescriptor) uint64 {
	t.Helper()
	for _, s := range tc.nodes {
		if replicaOf(d, s.NodeID()) == nil {
			return s.NodeID()
		}
	}
	t.Fatalf("every node holds a replica of %v", d)
	return 0
}

func replicaOf(d *tidekvpb.RangeDescriptor, node uint64) *tidekvpb.ReplicaDescriptor {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == node {
			return rd
		}
	}
	return nil
}

// checkMembers returns nil if d has exactly the voters want and no other
// replica.
func checkMembers(d *tidekvpb.RangeDescriptor, want ...uint64) error {
	var got []uint64
	for _, rd := range d.GetReplicas() {
		if rd.GetType() != tidekvpb.ReplicaType_VOTER {
			return fmt.Errorf("range %d: replica on node %d is %v: %v", d.GetRangeId(), rd.GetNodeId(), rd.GetType(), d)
		}
		got = append(got, rd.GetNodeId())
	}
	if len(got) != len(want) {
		return fmt.Errorf("range %d has voters on %v, want %v", d.GetRangeId(), got, want)
	}
	for _, n := range want {
		if replicaOf(d, n) == nil {
			return fmt.Errorf("range %d has voters on %v, want %v", d.GetRangeId(), got, want)
		}
	}
	return nil
}

func voterNodes(d *tidekvpb.RangeDescriptor) []uint64 {
	var out []uint64
	for _, rd := range d.GetReplicas() {
		if rd.GetType() == tidekvpb.ReplicaType_VOTER {
			out = append(out, rd.GetNodeId())
		}
	}
	return out
}

// moved returns voters with from replaced by to.
func moved(voters []uint64, from, to uint64) []uint64 {
	var out []uint64
	for _, n := range voters {
		if n != from {
			out = append(out, n)
		}
	}
	return append(out, to)
}

// dirDesc returns the directory's descriptor of rangeID.
func dirDesc(ctx context.Context, c *client.Client, rangeID uint64) (*tidekvpb.RangeDescriptor, error) {
	resp, err := c.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	for _, ri := range resp.GetRanges() {
		if ri.GetDesc().GetRangeId() == rangeID {
			return ri.GetDesc(), nil
		}
	}
	return nil, fmt.Errorf("range %d not in the directory", rangeID)
}

// waitDirectory waits until the range directory lists exactly the voters
// want for rangeID, and returns that descriptor.
func waitDirectory(t *testing.T, c *client.Client, rangeID uint64, want ...uint64) *tidekvpb.RangeDescriptor {
	t.Helper()
	var d *tidekvpb.RangeDescriptor
	eventually(t, 10*time.Second, fmt.Sprintf("directory lists range %d on %v", rangeID, want), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		if d, err = dirDesc(ctx, c, rangeID); err != nil {
			return err
		}
		return checkMembers(d, want...)
	})
	return d
}

// waitGone waits until node's store no longer holds a replica of rangeID.
func (tc *testCluster) waitGone(t *testing.T, node, rangeID uint64) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("node %d drops its replica of range %d", node, rangeID), func() error {
		if r := tc.server(node).Store().GetReplica(rangeID); r != nil {
			return fmt.Errorf("still there: %+v", r.Status())
		}
		return nil
	})
}

// waitMember waits until node's store holds an initialized replica of
// rangeID that has caught up with the leaseholder's applied index.
func (tc *testCluster) waitMember(t *testing.T, node, rangeID uint64) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("node %d catches up on range %d", node, rangeID), func() error {
		r := tc.server(node).Store().GetReplica(rangeID)
		if r == nil || r.Desc() == nil {
			return errors.New("no initialized replica")
		}
		lh := tc.server(tc.leaseholder(t, rangeID)).Store().GetReplica(rangeID)
		if lh == nil {
			return errors.New("leaseholder lost its replica")
		}
		if got, want := r.Status().Applied, lh.Status().Applied; got < want {
			return fmt.Errorf("applied %d of %d", got, want)
		}
		return nil
	})
}

func replicaKey(i int) []byte   { return []byte(fmt.Sprintf("rk%08d", i)) }
func replicaValue(i int) []byte { return []byte(fmt.Sprintf("value-%d", i)) }

// checkAllKeys reads keys [from, to) back through the client.
func checkAllKeys(t *testing.T, c *client.Client, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kvs, err := c.Scan(ctx, replicaKey(from), replicaKey(to), 0)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if len(kvs) != to-from {
		t.Fatalf("scan found %d keys, want %d", len(kvs), to-from)
	}
	for j, kv := range kvs {
		if i := from + j; !bytes.Equal(kv.Key, replicaKey(i)) || !bytes.Equal(kv.Value, replicaValue(i)) {
			t.Fatalf("scan[%d] = %s=%s, want %s=%s", j, kv.Key, kv.Value, replicaKey(i), replicaValue(i))
		}
	}
	// Point reads too, a sample of them (they take the lease path).
	for i := from; i < to; i += 17 {
		if v, err := c.Get(ctx, replicaKey(i)); err != nil || !bytes.Equal(v, replicaValue(i)) {
			t.Fatalf("get %s = %q, %v", replicaKey(i), v, err)
		}
	}
}

// userRange returns the (single, until the test splits) user range.
func userRange(t *testing.T, c *client.Client) *tidekvpb.RangeDescriptor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Ranges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ri := range resp.GetRanges() {
		if d := ri.GetDesc(); d.GetRangeId() != keys.MetaRangeID && keys.Contains(d.GetStartKey(), d.GetEndKey(), replicaKey(0)) {
			return d
		}
	}
	t.Fatalf("no range covers %s: %v", replicaKey(0), resp)
	return nil
}

// follower returns a voter of d other than the leaseholder lh.
func follower(t *testing.T, d *tidekvpb.RangeDescriptor, lh uint64) uint64 {
	t.Helper()
	for _, v := range voterNodes(d) {
		if v != lh {
			return v
		}
	}
	t.Fatalf("range %d has no voter besides node %d", d.GetRangeId(), lh)
	return 0
}

// moveReplica moves rangeID's replica from node from to node to with one
// ChangeReplicas call (promotion and removal in one joint-consensus
// change), checks the descriptor it returns, and waits until the directory
// lists the new voters, from has dropped its replica and to's has caught
// up.
func (tc *testCluster) moveReplica(t *testing.T, c *client.Client, rangeID, from, to uint64) {
	t.Helper()
	d := tc.localDesc(t, rangeID)
	want := moved(voterNodes(d), from, to)
	t.Logf("range %d on %v (leaseholder %d): moving node %d's replica to node %d", rangeID, voterNodes(d), tc.leaseholder(t, rangeID), from, to)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nd, err := c.ChangeReplicas(ctx, rangeID, to, from)
	if err != nil {
		t.Fatalf("move range %d from node %d to node %d: %v", rangeID, from, to, err)
	}
	if err := checkMembers(nd, want...); err != nil {
		t.Fatalf("returned descriptor: %v", err)
	}
	if nd.GetGeneration() <= d.GetGeneration() {
		t.Errorf("generation %d did not advance past %d", nd.GetGeneration(), d.GetGeneration())
	}
	waitDirectory(t, c, rangeID, want...)
	tc.waitGone(t, from, rangeID)
	tc.waitMember(t, to, rangeID)
}

// localDesc is the leaseholder's descriptor of rangeID: the applied truth.
func (tc *testCluster) localDesc(t *testing.T, rangeID uint64) *tidekvpb.RangeDescriptor {
	t.Helper()
	return tc.server(tc.leaseholder(t, rangeID)).Store().GetReplica(rangeID).Desc()
}

func TestChangeReplicas(t *testing.T) {
	tc := startCluster(t, 4)
	c := tc.client()
	tc.waitReplicated(c, 3)

	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		if err := c.Put(ctx, replicaKey(i), replicaValue(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	rid := userRange(t, c).GetRangeId()

	// change runs one ChangeReplicas call with its own deadline.
	change := func(add, remove uint64) (*tidekvpb.RangeDescriptor, error) {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return c.ChangeReplicas(cctx, rid, add, remove)
	}

	t.Run("move a follower's replica", func(t *testing.T) {
		d := tc.localDesc(t, rid)
		to := tc.nodeWithout(t, d)
		tc.moveReplica(t, c, rid, follower(t, d, tc.leaseholder(t, rid)), to)
		checkAllKeys(t, c, 0, n)

		// The new replica has the data itself: let it serve the reads.
		if err := c.TransferLease(ctx, rid, to); err != nil {
			t.Fatalf("transfer lease to node %d: %v", to, err)
		}
		eventually(t, 10*time.Second, "lease moves to the new replica", func() error {
			if r := tc.server(to).Store().GetReplica(rid); r == nil || !r.IsLeader() {
				return fmt.Errorf("node %d does not lead range %d", to, rid)
			}
			return nil
		})
		checkAllKeys(t, c, 0, n)
	})

	t.Run("removal below the replication factor is refused", func(t *testing.T) {
		d := tc.localDesc(t, rid)
		lh := tc.leaseholder(t, rid)
		if len(voterNodes(d)) != 3 {
			t.Fatalf("want 3 voters to start with: %v", d)
		}
		// A follower's replica, then the leaseholder's own.
		f := follower(t, d, lh)
		for _, victim := range []uint64{f, lh} {
			_, err := change(0, victim)
			if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "replication factor") {
				t.Fatalf("remove node %d of 3 voters: got %v, want ErrInvalidArgument naming the replication factor", victim, err)
			}
			t.Logf("remove node %d: %v", victim, err)
			if nd := tc.localDesc(t, rid); nd.GetGeneration() != d.GetGeneration() || checkMembers(nd, voterNodes(d)...) != nil {
				t.Fatalf("refused removal of node %d changed the range: %v -> %v", victim, d, nd)
			}
			// Nor did the lease move (removing the leaseholder's own
			// replica hands the lease away first, but only once the
			// removal is known to be allowed).
			if now := tc.leaseholder(t, rid); now != lh {
				t.Fatalf("refused removal of node %d moved the lease from node %d to node %d", victim, lh, now)
			}
		}
		waitDirectory(t, c, rid, voterNodes(d)...)
		tc.waitMember(t, f, rid)
		checkAllKeys(t, c, 0, n)
	})

	t.Run("adding an unknown node is refused", func(t *testing.T) {
		d := tc.localDesc(t, rid)
		_, err := change(99, 0)
		if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "node 99") {
			t.Fatalf("add node 99: got %v, want ErrInvalidArgument naming the node", err)
		}
		// And with a removal: nothing is removed either.
		_, err = change(99, voterNodes(d)[0])
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Fatalf("move to node 99: got %v, want ErrInvalidArgument", err)
		}
		if nd := tc.localDesc(t, rid); nd.GetGeneration() != d.GetGeneration() {
			t.Fatalf("refused addition changed the range: %v -> %v", d, nd)
		}
	})

	t.Run("move the leaseholder's replica", func(t *testing.T) {
		lh := tc.leaseholder(t, rid)
		// The leaseholder hands its lease to another voter and answers
		// NOT_LEASEHOLDER; the server that took the call (adminroute.Range)
		// retries at the new leaseholder, so the client sees success.
		tc.moveReplica(t, c, rid, lh, tc.nodeWithout(t, tc.localDesc(t, rid)))
		if newLH := tc.leaseholder(t, rid); newLH == lh {
			t.Fatalf("node %d still holds the lease", lh)
		}
		checkAllKeys(t, c, 0, n)
	})

	t.Run("split then move the right-hand range", func(t *testing.T) {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		resp, err := c.Split(sctx, replicaKey(n/2))
		if err != nil {
			t.Fatalf("split: %v", err)
		}
		left, right := resp.GetLeft(), resp.GetRight()
		if left.GetRangeId() != rid || right.GetRangeId() == rid {
			t.Fatalf("split returned left %v, right %v", left, right)
		}
		rr := right.GetRangeId()
		// Both halves start on the same nodes.
		lv := voterNodes(left)
		if err := checkMembers(right, lv...); err != nil {
			t.Fatal(err)
		}
		waitDirectory(t, c, rr, lv...)

		d := tc.localDesc(t, rr)
		from, to := follower(t, d, tc.leaseholder(t, rr)), tc.nodeWithout(t, d)
		tc.moveReplica(t, c, rr, from, to)

		// The left-hand range did not move: still on its nodes, node from
		// included, and node to still has none of it.
		waitDirectory(t, c, rid, lv...)
		if r := tc.server(from).Store().GetReplica(rid); r == nil {
			t.Errorf("node %d lost its replica of the left-hand range %d", from, rid)
		}
		if r := tc.server(to).Store().GetReplica(rid); r != nil {
			t.Errorf("node %d got a replica of the left-hand range %d", to, rid)
		}
		// The new replica covers the right-hand keys only.
		if d := tc.server(to).Store().GetReplica(rr).Desc(); !bytes.Equal(d.GetStartKey(), replicaKey(n/2)) || len(d.GetEndKey()) != 0 {
			t.Errorf("node %d's replica spans [%q, %q), want [%s, end)", to, d.GetStartKey(), d.GetEndKey(), replicaKey(n/2))
		}
		checkAllKeys(t, c, 0, n)
	})
}
