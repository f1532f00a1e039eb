package server

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

// A read the right range of a merge served stays as it was served: a
// write of its key after the merge, by the left range's leaseholder, is
// stamped above it. The left leaseholder's clock runs behind the right's
// (within the max offset) and the read is at the right one's clock plus
// the max offset, so a write stamped by the left one's clock alone lands
// under the read, and reading at its timestamp again finds the write.
// (TestBankUnderFaults's long runs lost an update this way, through a
// merge, a skew and TxnIf's reads at its coordinator's clock.)
func TestMergeKeepsTheRightRangesReads(t *testing.T) {
	f := &faultNodes{}
	tc := startClusterWith(t, 3, func(c *Config) {
		f.adjust(c)
		// A wide max offset (it needs a long election timeout) makes the
		// window between the two clocks wide enough for the merge to run
		// in.
		c.Raft.TickInterval = 100 * time.Millisecond
		c.Raft.MaxClockOffset = 400 * time.Millisecond
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := []byte("mr/k")
	if err := c.Put(ctx, key, []byte("before")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mr/", "mr/k"} {
		if _, err := c.Split(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	tc.waitReplicated(c, 3)
	var left, right *tidekvpb.RangeDescriptor
	eventually(t, 10*time.Second, "both ranges in the directory", func() error {
		var err error
		if left, err = rangeAt(ctx, c, []byte("mr/a")); err != nil {
			return err
		}
		if right, err = rangeAt(ctx, c, key); err == nil && !bytes.Equal(right.GetStartKey(), key) {
			err = fmt.Errorf("the range at %q is %v", key, right)
		}
		return err
	})
	lhL := tc.leaseholder(t, left.GetRangeId())
	if tc.leaseholder(t, right.GetRangeId()) == lhL {
		others := slices.DeleteFunc(voterNodes(right), func(n uint64) bool { return n == lhL })
		if err := c.TransferLease(ctx, right.GetRangeId(), others[0]); err != nil {
			t.Fatal(err)
		}
	}
	var lhR uint64
	eventually(t, 10*time.Second, "the ranges' leases on two nodes", func() error {
		if lhR = tc.leaseholder(t, right.GetRangeId()); lhR == lhL {
			return fmt.Errorf("both on node %d", lhL)
		}
		return nil
	})
	// The left leaseholder's clock 150 ms behind, the right one's 150 ms
	// ahead: 300 ms apart, within the 0.8 × 400 ms the offset monitor
	// allows.
	index := func(node uint64) int {
		return slices.IndexFunc(tc.nodes, func(s *Server) bool { return s.NodeID() == node })
	}
	f.skew(t, tc, index(lhL), -150*time.Millisecond)
	f.skew(t, tc, index(lhR), 150*time.Millisecond)
	at := c.Now()
	at.WallTime += int64(500 * time.Millisecond) // the right leaseholder's clock plus at most the 400 ms
	if v, err := c.Get(ctx, key, client.ReadAt(at)); err != nil || string(v) != "before" {
		t.Fatalf("read at %s: %q, %v", at, v, err)
	}
	if _, err := (&adminService{s: tc.server(lhL)}).Merge(ctx, &tidekvpb.MergeRequest{LeftRangeId: left.GetRangeId(), Reason: "test"}); err != nil && !mergedAt(ctx, c, key, 5*time.Second) {
		t.Fatal(err)
	}
	if err := c.Put(ctx, key, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, key, client.ReadAt(at)); err != nil || string(v) != "before" {
		t.Fatalf("read at %s again after the merge and a write: %q, %v; the write landed under the read the right range served", at, v, err)
	}
}
