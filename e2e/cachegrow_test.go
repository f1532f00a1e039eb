package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testcluster"
	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// A cache key space that grows instead of evicting, on real processes:
// `tidekv up --autoscale` with three nodes, a hashed memory key space with
// a TTL, a miss handler and 1 MiB per node (RF 1). Written past what three
// nodes hold at their pre-launch threshold, the controller asks the
// actuator for a fourth node before any node is full, the key space's
// ranges move, the new node ends up holding part of it, nothing is
// evicted, and every key (and one only the origin has) reads back.
func TestCacheKeySpaceGrowsTheCluster(t *testing.T) {
	tier.RequireLong(t, "a cache key space that grows the cluster by a real process takes about 75 s")
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	base := testcluster.FreeBasePort(t, 1)
	u := startUp(t, bin, dir, base, 3, "--autoscale", "--max-nodes", "4")
	ctx := testCtx(t, 5*time.Minute)
	cl := newClient(t, []string{u.nodes[1]["grpc"]})
	waitNodes(ctx, t, cl, 3, 60*time.Second)
	// Nodes here start in about a second: the threshold counts what a node
	// gains at the fastest rate while one starts, so the default (10 s, a
	// tenth of the capacity at these rates) would wait until nodes are
	// nearly full. The load rules stay out of it (reactive only, after a
	// million rounds): on a busy machine they asked for the fourth node
	// first (p99 over the SLO), and the cache then had none left to ask for.
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		_, err := cl.Settings(ctx, map[string]string{"autoscale.node-start-time": "1s",
			"autoscale.controller": "reactive", "autoscale.react-after": "1000000"})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	var fetches atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if k := r.URL.Query().Get("key"); k == "only-at-origin" {
			fmt.Fprint(w, "from-origin")
			return
		}
		http.NotFound(w, r)
	}))
	defer origin.Close()
	const capacity = 1 << 20
	var created *tidekvpb.KeySpace
	if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
		var err error
		created, err = cl.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "cache", Mode: "hashed", Rf: 1, Engine: "memory",
			CapacityPerNode: capacity, TtlMs: time.Hour.Milliseconds(), OnFull: "grow", MissHandler: origin.URL})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ks, err := cl.KeySpace(ctx, "cache")
	if err != nil {
		t.Fatal(err)
	}
	// Its eight hash slices (ranges of one replica) spread evenly over the
	// nodes before the load starts, as a key space created ahead of its use.
	lo, hi := keyspace.Span(keyspace.ID(created.GetId()))
	if err := eventually(ctx, 60*time.Second, func(ctx context.Context) error {
		per, err := cacheRangesPerNode(ctx, cl, lo, hi)
		if err != nil {
			return err
		}
		total, least, most := 0, keyspace.HashSlices, 0
		for _, n := range []uint64{1, 2, 3} {
			total += per[n]
			least, most = min(least, per[n]), max(most, per[n])
		}
		if total != keyspace.HashSlices || most-least > 1 {
			return fmt.Errorf("the key space's replicas per node: %v, want its %d slices spread evenly, one replica each", per, keyspace.HashSlices)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// 2 MiB over about 20 s: with the eight slices on three nodes, 0.5 to
	// 0.75 MiB a node, past the threshold (a little over half the
	// capacity at these rates) on the fullest and under the share at which
	// a node sheds (90%).
	val := bytes.Repeat([]byte("v"), 4<<10)
	const n = 500
	for i := range n {
		k := fmt.Appendf(nil, "user%04d", i)
		if err := eventually(ctx, 10*time.Second, func(ctx context.Context) error { return ks.Put(ctx, k, val) }); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	waitNodes(ctx, t, cl, 4, 120*time.Second)
	// The decisions live with the controller, which follows the meta
	// lease; the events are the cluster's record.
	evs, err := cl.Events(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	prelaunched := false
	for _, e := range evs {
		if e.GetKind() == "scale-out" || e.GetKind() == "overflow" {
			t.Logf("%s %s: %s", time.Unix(0, e.GetUnixNanos()).Format("15:04:05"), e.GetKind(), e.GetReason())
		}
		prelaunched = prelaunched || e.GetKind() == "scale-out" && strings.Contains(e.GetReason(), `pre-launch: key space "cache"`)
	}
	if !prelaunched {
		t.Fatal("the fourth node was not asked for by the cache key space's pre-launch rule")
	}

	if err := eventually(ctx, 90*time.Second, func(ctx context.Context) error {
		per, err := cacheRangesPerNode(ctx, cl, lo, hi)
		if err != nil || len(per) < 4 {
			return fmt.Errorf("the key space's replicas per node: %v, want some on the new node (%v)", per, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := fmt.Appendf(nil, "user%04d", i)
		var got []byte
		if err := eventually(ctx, 10*time.Second, func(ctx context.Context) error {
			got, err = ks.Get(ctx, k)
			return err
		}); err != nil || !bytes.Equal(got, val) {
			t.Fatalf("get %s after the growth: %d bytes, %v", k, len(got), err)
		}
	}
	if v, err := ks.Get(ctx, []byte("only-at-origin")); err != nil || string(v) != "from-origin" {
		t.Fatalf("read-through after the growth: %q, %v", v, err)
	}
	all, err := cl.KeySpaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		if k.GetName() != "cache" {
			continue
		}
		t.Logf("key space cache: %d keys, %d bytes, %d ranges, %d evictions, %d origin fetches", k.GetKeys(), k.GetBytes(), k.GetRanges(), k.GetEvictions(), fetches.Load())
		if k.GetEvictions() != 0 {
			t.Fatalf("%d keys evicted: a growing key space evicts only when no node may be added", k.GetEvictions())
		}
	}
	u.stop(t, dir)
}

// cacheRangesPerNode counts the replicas of ranges in [lo, hi) on each
// node.
func cacheRangesPerNode(ctx context.Context, cl *client.Client, lo, hi []byte) (map[uint64]int, error) {
	resp, err := cl.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	per := map[uint64]int{}
	for _, r := range resp.GetRanges() {
		d := r.GetDesc()
		if bytes.Compare(d.GetStartKey(), hi) >= 0 || (len(d.GetEndKey()) > 0 && bytes.Compare(d.GetEndKey(), lo) <= 0) {
			continue
		}
		for _, rd := range d.GetReplicas() {
			per[rd.GetNodeId()]++
		}
	}
	return per, nil
}
