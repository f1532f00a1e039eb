package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/kvapi"
)

// thetaMaxTest is the Θmax of the tests here: small, so that a few hundred
// KiB of writes split ranges many times.
const thetaMaxTest = 64 << 10

// checkStoredWithin fails t when a range of s stores more than Θmax, as a
// snapshot ships it: every key and value in its data span (every version,
// tombstone, intent and record), read from the engine.
func checkStoredWithin(t *testing.T, s *Server, after string) {
	t.Helper()
	for _, r := range s.store.Replicas() {
		if r.RangeID() == keys.MetaRangeID {
			continue
		}
		it, err := s.ks.Engine().NewIter(r.DataSpan())
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for ok := it.First(); ok; ok = it.Next() {
			n += len(it.Key()) + len(it.Value())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if n > thetaMaxTest {
			t.Fatalf("after %s, range %d stores %d bytes, above Θmax (%d)", after, r.RangeID(), n, thetaMaxTest)
		}
	}
}

// Θmax is an invariant: writes through every path that stores bytes in a
// range (a put, a batch write, a delete's tombstone, a CAS, a
// transaction's intents and record, a one-phase commit) never take a
// range above it, counted as a snapshot ships the range (old versions
// included), sampled after every request while ranges split.
func TestRangesNeverAboveThetaMax(t *testing.T) {
	tc := startClusterWith(t, 1, func(c *Config) {
		c.Placement.Rebalance = true
		c.Placement.RangeMaxBytes, c.Placement.RangeMinBytes = thetaMaxTest, thetaMaxTest/4
	})
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := tc.nodes[0]
	val := []byte(strings.Repeat("v", 900))
	key := func(i int) []byte { return []byte(fmt.Sprintf("tk%05d", i*7919%10007)) }
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkStoredWithin(t, s, what)
	}
	if err := c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, key(0), val) }); err != nil {
		t.Fatalf("a first transaction: %v", err)
	}
	for i := range 40 {
		k := 10 * i
		step("a put", c.Put(ctx, key(k), val))
		// Overwrites: old versions stay until GC and count.
		step("an overwrite", c.Put(ctx, key(k), val))
		// One range's write: the second key right after the first.
		step("a batch write", c.Write(ctx, []client.Op{{Key: key(k + 1), Value: val}, {Key: append(key(k+1), 'b'), Value: val}}))
		_, err := c.Delete(ctx, key(k+1))
		step("a delete", err)
		_, _, _, err = c.CompareAndSet(ctx, key(k+3), nil, &val)
		step("a CAS", err)
		// Keys far apart: once the key space has split, a transaction's
		// two keys lie in two ranges and commit through intents.
		step("a two-key transaction", c.Txn(ctx, func(tx *client.Tx) error {
			if err := tx.Put(ctx, key(k+4), val); err != nil {
				return err
			}
			return tx.Put(ctx, key(k+5000), val)
		}))
		step("a one-key transaction", c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, key(k+6), val) }))
	}
	if n := txnCommits(tc, "two_phase"); n == 0 {
		t.Fatal("no transaction committed through intents")
	}
	if n := txnCommits(tc, "one_phase"); n == 0 {
		t.Fatal("no transaction committed in one phase")
	}
	if n := len(s.store.Replicas()); n < 5 {
		t.Fatalf("%d replicas: the writes should have split the key space", n)
	}
}

// With rebalancing off nothing splits a full range, and Θmax still holds:
// a write that would take the range past it is refused as overloaded
// after SplitBackpressureWait (the client may retry), deletes included
// (their tombstones are stored until GC), until an operator splits it.
func TestSplitBackpressure(t *testing.T) {
	tc := startClusterWith(t, 1, func(c *Config) {
		c.Placement.Rebalance = false
		c.Placement.RangeMaxBytes, c.Placement.RangeMinBytes = thetaMaxTest, thetaMaxTest/4
		c.SplitBackpressureWait = 300 * time.Millisecond
	})
	// Refusals come back at once rather than after the client's retries.
	c := tc.client(func(cfg *client.Config) { cfg.FailFastOnOverload = true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	val := []byte(strings.Repeat("x", 1000))
	var refused error
	n := 0
	for ; n < 2*thetaMaxTest/len(val) && refused == nil; n++ {
		if err := c.Put(ctx, replicaKey(n), val); err != nil {
			refused = err
		}
		checkStoredWithin(t, tc.nodes[0], fmt.Sprintf("put %d", n))
	}
	if !errors.Is(refused, client.ErrOverloaded) || !strings.Contains(refused.Error(), "above its size limit") {
		t.Fatalf("after %d puts of 1000 bytes into a range of Θmax %d: %v, want a refusal saying the range is full", n, thetaMaxTest, refused)
	}
	// What the range has left is under the refused put's growth, and each
	// delete stores a tombstone of at least its key: deletes are refused
	// once they have spent it. (On a cluster that migrated mid-test the
	// migration's rewrite had spent it all, and the first delete was.)
	putGrowth, keyLen := kvapi.Growth(nil, &tidekvpb.WriteOp{Key: replicaKey(n), Value: val}), uint64(len(replicaKey(0)))
	deletes := 0
	for ; ; deletes++ {
		if uint64(deletes) > putGrowth/keyLen {
			t.Fatalf("%d deletes in the full range went ahead, want one refused: their tombstones count", deletes)
		}
		_, err := c.Delete(ctx, replicaKey(deletes))
		if errors.Is(err, client.ErrOverloaded) {
			break
		}
		if err != nil {
			t.Fatalf("delete %d in the full range: %v, want it done or refused as overloaded", deletes, err)
		}
	}
	t.Logf("%d deletes went ahead in the full range before one was refused", deletes)
	checkStoredWithin(t, tc.nodes[0], "the refused writes")
	if _, err := c.Split(ctx, replicaKey(n/2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "writes go ahead once the range split", func() error {
		return c.Put(ctx, replicaKey(n), val)
	})
	checkStoredWithin(t, tc.nodes[0], "the split")
	if n := gathered(t, tc.nodes[0], "tidekv_split_backpressure_total", "outcome", "refused"); n < 1 {
		t.Fatalf("refused holds counted %v times", n)
	}
}

// Only a range's leaseholder holds its growing writes: a follower keeps no
// write budget, and a put that reaches it is refused at once as
// NOT_LEASEHOLDER, naming the leaseholder, as any write there is. Held
// there instead, it came back as RANGE_BUSY after SplitBackpressureWait,
// and its client retried the same follower until its deadline.
func TestGrowingWriteAtFollowerNotHeld(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Placement.RangeMaxBytes, c.Placement.RangeMinBytes = thetaMaxTest, thetaMaxTest/4
		c.SplitBackpressureWait = 300 * time.Millisecond
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := replicaKey(1)
	if err := c.Put(ctx, key, replicaValue(1)); err != nil {
		t.Fatal(err)
	}
	r, err := tc.nodes[0].replicaFor(key)
	if err != nil {
		t.Fatal(err)
	}
	lh := tc.leaseholder(t, r.RangeID())
	follower := tc.server(tc.followerOf(t, r.RangeID()))
	_, err = (&kvService{s: follower}).Put(ctx, &tidekvpb.PutRequest{Key: key, Value: replicaValue(2)})
	if d := errorDetail(err); d.GetKind() != tidekvpb.ErrorKind_NOT_LEASEHOLDER || d.GetLeaderNodeId() != lh {
		t.Fatalf("a put at follower n%d: %v (detail %v), want NOT_LEASEHOLDER naming n%d", follower.NodeID(), err, d, lh)
	}
}
