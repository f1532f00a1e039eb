package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

// A read at a timestamp sees the data as it was then, on the leaseholder
// and, once their closed timestamps pass it, on the followers.
func TestFollowerReadsAtTimestamp(t *testing.T) {
	tc := startCluster(t, 3)
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	at := c.Now()
	if err := c.Put(ctx, []byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, []byte("k"), client.ReadAt(at)); err != nil || string(v) != "v1" {
		t.Fatalf("read at %v on the leaseholder: %q, %v; want v1", at, v, err)
	}
	followers := 0
	for _, n := range tc.nodes {
		r := n.Store().LookupKey([]byte("k"))
		if r == nil || r.IsLeader() {
			continue
		}
		followers++
		conn, err := grpc.NewClient(n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		kv := tidekvpb.NewKVClient(conn)
		req := &tidekvpb.GetRequest{Key: []byte("k"), ReadMode: tidekvpb.ReadMode_ANY, ReadTimestamp: tidekvpb.FromHLC(at)}
		eventually(t, 10*time.Second, fmt.Sprintf("node %d to serve a read at %v", n.NodeID(), at), func() error {
			resp, err := kv.Get(ctx, req)
			if err != nil || string(resp.GetValue()) != "v1" {
				return fmt.Errorf("follower read: %q, %v", resp.GetValue(), err)
			}
			return nil
		})
	}
	if followers != 2 {
		t.Fatalf("%d followers of k's range, want 2", followers)
	}
	if v, err := c.Get(ctx, []byte("k"), client.FollowerReadAt(at)); err != nil || string(v) != "v1" {
		t.Fatalf("client follower read at %v: %q, %v", at, v, err)
	}
	if v, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "v2" {
		t.Fatalf("latest read: %q, %v", v, err)
	}
	future := at
	future.WallTime += int64(time.Hour)
	if _, err := c.Get(ctx, []byte("k"), client.ReadAt(future)); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "in the future") {
		t.Fatalf("read an hour ahead: %v", err)
	}
}

// Transfers between two keys on two ranges, debit first: every consistent
// cut holds at most the total and at least the total less one transfer in
// flight. Snapshot scans (one timestamp for both ranges) always see such a
// cut; a scan of the newest data reads the ranges at different moments and
// may count a transfer's credit without its debit.
func TestSnapshotScanIsConsistentAcrossRanges(t *testing.T) {
	tc := startCluster(t, 1)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const total, maxAmount = 1000, 10
	balance := map[string]int{"acct-a": total, "acct-b": 0}
	for k, v := range balance {
		if err := c.Put(ctx, []byte(k), []byte(strconv.Itoa(v))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Split(ctx, []byte("acct-b")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the accounts on two ranges", func() error {
		if a, b := tc.nodes[0].Store().LookupKey([]byte("acct-a")), tc.nodes[0].Store().LookupKey([]byte("acct-b")); a == nil || b == nil || a.RangeID() == b.RangeID() {
			return errors.New("acct-a and acct-b are not on two ranges of node 1 yet")
		}
		return nil
	})
	sum := func(kvs []client.KeyValue) int {
		s := 0
		for _, kv := range kvs {
			n, err := strconv.Atoi(string(kv.Value))
			if err != nil {
				t.Errorf("%s = %q", kv.Key, kv.Value)
			}
			s += n
		}
		return s
	}
	if kvs, _, err := c.SnapshotScan(ctx, []byte("acct-"), []byte("acct-z"), 0); err != nil || sum(kvs) != total {
		t.Fatalf("a snapshot scan before any transfer: sum %d, %v; want %d", sum(kvs), err, total)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(1))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			from, to := "acct-a", "acct-b"
			if i%2 == 1 && balance["acct-b"] >= maxAmount {
				from, to = to, from
			}
			amt := 1 + rng.Intn(maxAmount)
			for _, w := range []struct {
				k string
				d int
			}{{from, -amt}, {to, amt}} {
				balance[w.k] += w.d
				if err := c.Put(ctx, []byte(w.k), []byte(strconv.Itoa(balance[w.k]))); err != nil {
					t.Errorf("transfer %d: %v", i, err)
					return
				}
			}
		}
	}()
	snapshots, created := 0, 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		kvs, at, err := c.SnapshotScan(ctx, []byte("acct-"), []byte("acct-z"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if s := sum(kvs); s > total || s < total-maxAmount {
			t.Fatalf("snapshot scan at %v: sum %d, want %d less at most one transfer of ≤ %d", at, s, total, maxAmount)
		}
		snapshots++
		latest, err := c.Scan(ctx, []byte("acct-"), []byte("acct-z"), 0)
		if err != nil {
			t.Fatal(err)
		}
		if sum(latest) > total {
			created++
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d snapshot scans, all consistent; %d scans of the newest data counted money in flight twice", snapshots, created)
}
