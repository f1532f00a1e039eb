package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestKeySpaceCLI: `tidekv ctl keyspace create` refuses bad settings with
// one sentence and creates nothing, creates a hashed key space, and
// `keyspace list --json` shows it with every field scripts read, the
// bytes written into it once its ranges report, and its hits and misses.
func TestKeySpaceCLI(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	bin := testcluster.Binary(t)
	ctx := testCtx(t, 2*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "sorted"}, `unknown mode "sorted"`},
		{[]string{"--engine", "rocks"}, `unknown engine "rocks"`},
		{[]string{"--capacity-per-node", "0"}, "--capacity-per-node must be a size above 0"},
		{[]string{"--ttl", "-1s"}, "--ttl must be whole milliseconds and not negative"},
		{[]string{"--gc-ttl", "-1s"}, "gc-ttl -1s must not be negative"},
		{[]string{"--gc-ttl", "1500us"}, "--gc-ttl must be whole milliseconds"},
		{[]string{"--rf", "9"}, "replication factor 9"},
		{[]string{"--miss-handler", "ftp://origin/x"}, `miss handler "ftp://origin/x" must be an http or https URL`},
	} {
		_, code, err := ctl(ctx, bin, tc.Addr(1), append([]string{"keyspace", "create", "sessions"}, bad.args...)...)
		if code != 2 || err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("create with %v: exit %d, %v; want exit 2 naming %q", bad.args, code, err, bad.want)
		}
	}
	out, code, err := ctl(ctx, bin, tc.Addr(1), "keyspace", "create", "sessions", "--mode", "hashed", "--rf", "1",
		"--engine", "memory", "--capacity-per-node", "64MiB", "--ttl", "30s", "--gc-ttl", "5s", "--json")
	if err != nil {
		t.Fatalf("create: exit %d, %v", code, err)
	}
	var made map[string]any
	if err := json.Unmarshal([]byte(out), &made); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if made["id"] != 1.0 || made["mode"] != "hashed" || made["engine"] != "memory" || made["index"] != "btree" ||
		made["rf"] != 1.0 || made["capacity_per_node"] != float64(64<<20) || made["ttl_ms"] != 30000.0 ||
		made["gc_ttl_ms"] != 5000.0 {
		t.Fatalf("created %s", out)
	}
	if _, code, err := ctl(ctx, bin, tc.Addr(2), "keyspace", "create", "sessions"); code != 2 || err == nil || !strings.Contains(err.Error(), `key space "sessions" exists`) {
		t.Fatalf("second create: exit %d, %v", code, err)
	}

	// ctl's key operations work in the key space --keyspace names.
	if _, code, err := ctl(ctx, bin, tc.Addr(1), "--keyspace", "sessions", "put", "k", "in-sessions"); err != nil {
		t.Fatalf("put: exit %d, %v", code, err)
	}
	if out, code, err := ctl(ctx, bin, tc.Addr(2), "--keyspace", "sessions", "get", "k"); err != nil || out != "in-sessions" {
		t.Fatalf("get in sessions: %q, exit %d, %v", out, code, err)
	}
	if _, code, _ := ctl(ctx, bin, tc.Addr(2), "get", "k"); code != 1 {
		t.Fatalf("get k in the default key space: exit %d, want 1 (not found)", code)
	}
	if _, code, err := ctl(ctx, bin, tc.Addr(2), "--keyspace", "sessions", "scan", "", ""); code != 2 || err == nil || !strings.Contains(err.Error(), "is hashed") {
		t.Fatalf("scan of a hashed key space: exit %d, %v", code, err)
	}

	ks, err := cl.KeySpace(ctx, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	val := strings.Repeat("v", 1024)
	for i := range 50 {
		if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			return ks.Put(ctx, fmt.Appendf(nil, "session%03d", i), []byte(val))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if ttl, err := ks.TTL(ctx, []byte("session000")); err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("a value written without a TTL has TTL %v, %v; want the key space's 30s", ttl, err)
	}
	fields := []string{"name", "mode", "engine", "index", "rf", "capacity_per_node", "ttl_ms", "gc_ttl_ms", "bytes", "keys", "hits", "misses", "evictions"}
	// One hit (the get of k above) and one miss (this one), summed from
	// the nodes' heartbeats.
	if _, code, _ := ctl(ctx, bin, tc.Addr(1), "--keyspace", "sessions", "get", "absent"); code != 1 {
		t.Fatalf("get of an absent key: exit %d, want 1 (not found)", code)
	}
	if err := eventually(ctx, 40*time.Second, func(ctx context.Context) error {
		out, code, err := ctl(ctx, bin, tc.Addr(3), "keyspace", "list", "--json")
		if err != nil {
			return fmt.Errorf("exit %d: %v", code, err)
		}
		var list struct {
			KeySpaces []map[string]any `json:"keyspaces"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if len(list.KeySpaces) != 2 || list.KeySpaces[0]["name"] != "default" || list.KeySpaces[1]["name"] != "sessions" {
			return fmt.Errorf("list: %s", out)
		}
		for _, k := range list.KeySpaces {
			for _, f := range fields {
				if _, ok := k[f]; !ok {
					t.Fatalf("key space %v lacks field %q: %s", k["name"], f, out)
				}
			}
		}
		if b := list.KeySpaces[1]["bytes"].(float64); b < 50*1024 {
			return fmt.Errorf("sessions holds %v bytes, want at least the 50 KiB written: %s", b, out)
		}
		if h, m := list.KeySpaces[1]["hits"].(float64), list.KeySpaces[1]["misses"].(float64); h < 1 || m < 1 {
			return fmt.Errorf("sessions lists %v hits and %v misses, want the get of k and of an absent key: %s", h, m, out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryKeySpaceRefillsAfterKill: a memory key space's data lives in
// memory, so a node killed and restarted has lost its share; the
// leaseholders replace its replicas of the key space's ranges with fresh
// ones, after which reads served by its leases return every value. Killed
// all at once, the nodes lose the key space's data everywhere: its ranges
// start again empty and take writes.
func TestMemoryKeySpaceRefillsAfterKill(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	bin := testcluster.Binary(t)
	ctx := testCtx(t, 2*time.Minute)
	cl := newClient(t, tc.Addrs())
	waitReplicated(ctx, t, cl, 3)
	if _, code, err := ctl(ctx, bin, tc.Addr(1), "keyspace", "create", "cache", "--mode", "hashed", "--engine", "memory", "--ttl", "10m"); err != nil {
		t.Fatalf("create: exit %d, %v", code, err)
	}
	ks, err := cl.KeySpace(ctx, "cache")
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range n {
		if err := eventually(ctx, 20*time.Second, func(ctx context.Context) error {
			return ks.Put(ctx, fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%03d", i))
		}); err != nil {
			t.Fatal(err)
		}
	}

	// Node 2 keeps the key space in memory once it learns of it (within a
	// second of holding a range inside it); before, its share is in Pebble.
	hc := testcluster.HTTPClient(t, 5*time.Second)
	if err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		if n, err := metric(hc, tc.HTTPAddr(2), "tidekv_memory_keyspaces"); err != nil || n != 1 {
			return fmt.Errorf("node 2 keeps %v key spaces in memory (%v)", n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tc.Kill(2)
	tc.Restart(2)
	if n, err := metric(hc, tc.HTTPAddr(2), "tidekv_replicas_lost_total"); err != nil || n == 0 {
		t.Fatalf("replicas lost with the restart: %v, %v", n, err)
	}
	// Once refilled, node 2 can take every lease of the key space.
	to := tc.NodeID(2)
	if err := eventually(ctx, 60*time.Second, func(ctx context.Context) error {
		resp, err := cl.Ranges(ctx)
		if err != nil {
			return err
		}
		for _, ri := range resp.GetRanges() {
			d := ri.GetDesc()
			if keyspace.Of(d.GetStartKey()) != 1 || ri.GetLeaderNodeId() == to {
				continue
			}
			if err := cl.TransferLease(ctx, d.GetRangeId(), to); err != nil {
				return err
			}
			return fmt.Errorf("range %d: lease moved to node %d, checking again", d.GetRangeId(), to)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if v, err := ks.Get(ctx, fmt.Appendf(nil, "k%03d", i)); err != nil || string(v) != fmt.Sprintf("v%03d", i) {
			t.Fatalf("k%03d after the restart = %q, %v", i, v, err)
		}
	}

	// The whole cluster: no replica keeps the data, every range of the
	// key space starts again empty and serves. A node keeps its share in
	// Pebble until it learns the key space is a memory one, so the kill
	// waits until every node has learnt it (node 2 relearns after its
	// restart).
	for i := 1; i <= 3; i++ {
		if err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
			if n, err := metric(hc, tc.HTTPAddr(i), "tidekv_memory_keyspaces"); err != nil || n != 1 {
				return fmt.Errorf("node %d keeps %v key spaces in memory (%v)", i, n, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	tc.KillAll()
	tc.RestartAll()
	cl = newClient(t, tc.Addrs())
	if ks, err = cl.KeySpace(ctx, "cache"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := fmt.Appendf(nil, "k%03d", i)
		var survived []byte
		if err := eventually(ctx, 60*time.Second, func(ctx context.Context) error {
			v, err := ks.Get(ctx, k)
			switch {
			case err == nil && string(v) != "again":
				survived = v
				return nil
			case err != nil && !errors.Is(err, client.ErrNotFound):
				return fmt.Errorf("k%03d after the whole cluster's restart: %v", i, err)
			}
			return ks.Put(ctx, k, []byte("again"))
		}); err != nil {
			t.Fatal(err)
		}
		if survived != nil {
			t.Fatalf("k%03d = %q after every node lost its memory", i, survived)
		}
	}
	var reset float64
	for i := 1; i <= 3; i++ {
		m, err := metric(hc, tc.HTTPAddr(i), "tidekv_lost_ranges_reset_total")
		if err != nil {
			t.Fatal(err)
		}
		reset += m
	}
	if reset == 0 {
		t.Fatal("no range was reset after the whole cluster's restart")
	}
}
