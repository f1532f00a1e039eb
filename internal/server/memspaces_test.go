package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/storage"
)

// TestMemoryKeySpace: a hashed memory key space with a TTL and a miss
// handler keeps its data in memory engines on every replica and nothing in
// Pebble; it splits by size, a range moves to a node that had none (a
// snapshot of a memory range), and a node restarted on what its base
// engine held drops its memory replicas and refills them from the other
// voters, after which reads through its lease return every value.
func TestMemoryKeySpace(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("origin:" + r.URL.Query().Get("key")))
	}))
	defer origin.Close()
	var f faultNodes
	tc := startClusterWith(t, 4, func(c *Config) {
		f.adjust(c)
		c.Placement.Rebalance, c.Placement.Merges = true, false
		c.Placement.RangeMaxBytes, c.Placement.RangeMinBytes = 64<<10, 16<<10
		// The restart below is one the range repairs itself (a fresh
		// replica on the same node), not a dead node whose replicas
		// placement replaces elsewhere: with the tests' 3 s grace a
		// loaded machine took longer than that to stop and start the node,
		// and the replica went to another node.
		c.Control.DeadNodeGrace = time.Hour
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "mem", Mode: "hashed", Rf: 3, Engine: "memory",
		Index: "exthash", TtlMs: time.Hour.Milliseconds(), MissHandler: origin.URL})
	if err != nil {
		t.Fatal(err)
	}
	ksID := keyspace.ID(created.GetId())
	cat := ksconfig.NewCatalogue([]ksconfig.KeySpace{ksconfig.FromAPI(created)})
	eventually(t, 30*time.Second, "ranges split at the key space's bounds", func() error { return checkKeySpaceRanges(ctx, c, cat) })
	ks, err := c.KeySpace(ctx, "mem")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	value := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 100) }
	for i := range n {
		if err := ks.Put(ctx, fmt.Appendf(nil, "key%05d", i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	var ranges []*tidekvpb.RangeDescriptor
	eventually(t, 60*time.Second, "the key space split by size", func() error {
		ranges, err = keySpaceRanges(ctx, tc, ksID)
		if err == nil && len(ranges) < 3 {
			err = fmt.Errorf("%d ranges", len(ranges))
		}
		return err
	})
	checkInMemory(t, tc, ksID)
	// The moves below are the test's own.
	if _, err := c.Settings(ctx, map[string]string{"rebalance": "false"}); err != nil {
		t.Fatal(err)
	}
	checkTTLAndMissHandler(ctx, t, ks)

	// A memory range moves to a node that had none of it: its snapshot.
	rid := ranges[0].GetRangeId()
	from, to := tc.followerOf(t, rid), tc.nodeWithout(t, tc.localDesc(t, rid))
	tc.moveReplica(t, c, rid, from, to)
	waitSameData(t, tc, rid, to)
	checkInMemory(t, tc, ksID)

	// A restart of a voter that does not hold the lease: its memory is
	// gone, and the leaseholder replaces its lost replicas with fresh ones.
	victim := tc.followerOf(t, rid)
	i := nodeIndex(tc, victim)
	base := tc.kill(i, f.parts[i])
	tc.restartOn(ctx, i, base)
	if got := tc.nodes[i].Store().Stats().ReplicasLost.Load(); got == 0 {
		t.Fatal("no replica lost its data with the restart")
	}
	waitSameData(t, tc, rid, victim)
	if err := c.TransferLease(ctx, rid, victim); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if v, err := ks.Get(ctx, fmt.Appendf(nil, "key%05d", i)); err != nil || !bytes.Equal(v, value(i)) {
			t.Fatalf("key%05d after the restart = %q, %v", i, v, err)
		}
	}
	checkInMemory(t, tc, ksID)
	checkListed(ctx, t, c, n)
}

// checkTTLAndMissHandler: a key written without a TTL has the key space's
// (1h), and a miss answers the origin's value.
func checkTTLAndMissHandler(ctx context.Context, t *testing.T, ks *client.KeySpace) {
	t.Helper()
	if ttl, err := ks.TTL(ctx, []byte("key00001")); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL of a key written without one = %v, %v (the key space's is 1h)", ttl, err)
	}
	if v, err := ks.Get(ctx, []byte("never-written")); err != nil || string(v) != "origin:never-written" {
		t.Fatalf("a miss = %q, %v, want the origin's value", v, err)
	}
}

// checkListed waits until `keyspace list` shows the memory key space's n
// keys. keys and bytes come from each range's last exact count, which lags
// the writes by up to a quarter of Θmax (docs/keyspaces.md).
func checkListed(ctx context.Context, t *testing.T, c *client.Client, n uint64) {
	t.Helper()
	eventually(t, 30*time.Second, "keyspace list reports the data", func() error {
		all, err := c.KeySpaces(ctx)
		if err != nil {
			return err
		}
		if k := all[len(all)-1]; k.GetKeys() < n/2 || k.GetBytes() < k.GetKeys()*100 || k.GetEngine() != "memory" || k.GetIndex() != "exthash" {
			return fmt.Errorf("listed %v", k)
		}
		return nil
	})
}

// followerOf is a voter of rangeID that does not hold its lease.
func (tc *testCluster) followerOf(t *testing.T, rangeID uint64) uint64 {
	d := tc.localDesc(t, rangeID)
	if v := voterNodes(d)[0]; v != tc.leaseholder(t, rangeID) {
		return v
	}
	return voterNodes(d)[1]
}

func keySpaceRanges(ctx context.Context, tc *testCluster, id keyspace.ID) ([]*tidekvpb.RangeDescriptor, error) {
	resp, err := tc.client().Ranges(ctx)
	if err != nil {
		return nil, err
	}
	var out []*tidekvpb.RangeDescriptor
	for _, ri := range resp.GetRanges() {
		if keyspace.Of(ri.GetDesc().GetStartKey()) == id {
			out = append(out, ri.GetDesc())
		}
	}
	return out, nil
}

func nodeIndex(tc *testCluster, nodeID uint64) int {
	for i, s := range tc.nodes {
		if s.NodeID() == nodeID {
			return i
		}
	}
	tc.t.Fatalf("no node %d", nodeID)
	return -1
}

// checkInMemory waits until no node's base engine holds key space id's
// data (a node routes a key space once it learns of it, and copies what
// its replicas wrote before) and the nodes together hold some, in their
// memory engines.
func checkInMemory(t *testing.T, tc *testCluster, id keyspace.ID) {
	t.Helper()
	eventually(t, 10*time.Second, "the key space's data in memory engines only", func() error {
		total := 0
		for _, s := range tc.nodes {
			for _, sp := range raftstore.UserDataSpans(keyspace.Span(id)) {
				if n := countKeys(t, s.ks.Base(), sp[0], sp[1]); n > 0 {
					return fmt.Errorf("node %d's base engine holds %d keys of the memory key space", s.NodeID(), n)
				}
				total += countKeys(t, s.ks.Engine(), sp[0], sp[1])
			}
		}
		if total == 0 {
			return errors.New("no node holds the key space's data")
		}
		return nil
	})
}

func countKeys(t *testing.T, r storage.Reader, lo, hi []byte) int {
	it, err := r.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitSameData waits until node's replica of rangeID is a voter, in its
// own descriptor and in the leaseholder's, and holds the live keys the
// leaseholder's does.
func waitSameData(t *testing.T, tc *testCluster, rangeID, node uint64) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("node %d's replica of range %d refilled", node, rangeID), func() error {
		r := tc.server(node).Store().GetReplica(rangeID)
		lr := tc.server(tc.leaseholder(t, rangeID)).Store().GetReplica(rangeID)
		if r == nil || r.Desc() == nil || lr == nil {
			return fmt.Errorf("no initialized replica on node %d", node)
		}
		if r.DataLost() {
			return fmt.Errorf("node %d's replica still lost", node)
		}
		// The leaseholder may apply the promotion after the node does: on
		// a loaded machine the lease transfer that follows was refused
		// ("node 4 holds no voter of range 4").
		if !isVoterOn(r.Desc(), node) || !isVoterOn(lr.Desc(), node) {
			return fmt.Errorf("node %d's replica is not a voter yet, on it or on the leaseholder", node)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		got, err := r.DataSize(ctx)
		if err != nil {
			return err
		}
		want, err := lr.DataSize(ctx)
		if err == nil && (got.Keys != want.Keys || got.Keys == 0) {
			err = fmt.Errorf("%d live keys, the leaseholder %d", got.Keys, want.Keys)
		}
		return err
	})
}

func isVoterOn(d *tidekvpb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == node {
			return rd.GetType() == tidekvpb.ReplicaType_VOTER
		}
	}
	return false
}
