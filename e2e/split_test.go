package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testcluster"
)

func scanKey(i int) []byte { return []byte(fmt.Sprintf("scan/%05d", i)) }

// checkScan scans [start, end) with limit and expects exactly the keys
// scanKey(from)..scanKey(to-1) with their values, in order.
func checkScan(ctx context.Context, t *testing.T, cl *client.Client, start, end []byte, limit, from, to int) {
	t.Helper()
	var kvs []client.KeyValue
	if err := eventually(ctx, 10*time.Second, func(ctx context.Context) (err error) {
		kvs, err = cl.Scan(ctx, start, end, limit)
		return err
	}); err != nil {
		t.Fatalf("scan [%s, %s) limit %d: %v", start, end, limit, err)
	}
	if len(kvs) != to-from {
		t.Errorf("scan [%s, %s) limit %d: %d keys, want %d (%s..%s)", start, end, limit, len(kvs), to-from, scanKey(from), scanKey(to-1))
	}
	for j, kv := range kvs {
		wantKey := scanKey(from + j)
		if !bytes.Equal(kv.Key, wantKey) || !bytes.Equal(kv.Value, []byte("v"+string(wantKey))) {
			t.Fatalf("scan [%s, %s) limit %d: entry %d = %s=%s, want %s", start, end, limit, j, kv.Key, kv.Value, wantKey)
		}
	}
}

// TestSplitThenScan splits the key space with `tidekv ctl split` (and once
// more through the client) and checks that scans stitch the ranges back
// together: every key, in order, none twice, across the boundaries.
func TestSplitThenScan(t *testing.T) {
	n := 100
	if long() {
		n = 1000
	}
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	ctx := testCtx(t, 90*time.Second)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)

	for i := 0; i < n; i++ {
		k := scanKey(i)
		if err := eventually(ctx, 10*time.Second, func(ctx context.Context) error {
			return cl.Put(ctx, k, []byte("v"+string(k)))
		}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}

	mid, q3 := scanKey(n/2), scanKey(3*n/4)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if out, code, err := ctl(sctx, testcluster.Binary(t), tc.Addr(2), "split", string(mid)); err != nil {
		t.Fatalf("ctl split %s: exit %d: %v (%s)", mid, code, err, out)
	}
	// Splits are not retried by the client (their outcome can be
	// ambiguous), so bound this one rather than wait out the test.
	sctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := cl.Split(sctx, q3)
	if err != nil {
		t.Fatalf("client split at %s: %v", q3, err)
	}
	if !bytes.Equal(resp.GetLeft().GetEndKey(), q3) || !bytes.Equal(resp.GetRight().GetStartKey(), q3) {
		t.Errorf("split at %s returned left %v, right %v", q3, resp.GetLeft(), resp.GetRight())
	}

	// The meta range learns about splits from the leaseholders; wait until
	// it reports both boundaries.
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		rs, err := cl.Ranges(ctx)
		if err != nil {
			return err
		}
		for _, b := range [][]byte{mid, q3} {
			r := rangeFor(rs, b)
			if r == nil || !bytes.Equal(r.GetDesc().GetStartKey(), b) {
				return fmt.Errorf("no range starts at %s yet", b)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	prefixEnd := []byte("scan0")                                             // '0' follows '/'
	checkScan(ctx, t, cl, []byte("scan/"), prefixEnd, 0, 0, n)               // everything
	checkScan(ctx, t, cl, scanKey(n/2-5), prefixEnd, 10, n/2-5, n/2+5)       // limit across a boundary
	checkScan(ctx, t, cl, mid, scanKey(n/2+3), 0, n/2, n/2+3)                // starting at a boundary
	checkScan(ctx, t, cl, scanKey(n/2-3), mid, 0, n/2-3, n/2)                // ending at a boundary
	checkScan(ctx, t, cl, scanKey(n/4), scanKey(3*n/4+10), 0, n/4, 3*n/4+10) // across both

	// Keys on both sides of a boundary stay writable and readable.
	for _, k := range [][]byte{scanKey(n/2 - 1), mid, q3} {
		v := []byte("v" + string(k))
		if err := eventually(ctx, 10*time.Second, func(ctx context.Context) error { return cl.Put(ctx, k, v) }); err != nil {
			t.Fatalf("put %s after split: %v", k, err)
		}
		if got, err := cl.Get(ctx, k); err != nil || !bytes.Equal(got, v) {
			t.Errorf("get %s after split = %q, %v", k, got, err)
		}
	}
}
