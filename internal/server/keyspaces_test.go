package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/keyspace"
)

// TestKeySpaces: an ordered and a hashed key space next to the default one.
// Bad settings and a name in use are refused and create nothing; ranges are
// split at the key spaces' bounds and follow each key space's replication
// factor; one user key holds three values, one per key space, through gRPC
// and Redis SELECT; the hashed key space refuses scans, and its ranges split
// by size at hash values, so each holds keys from all over the user keys'
// order.
func TestKeySpaces(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Redis.ListenAddr = "127.0.0.1:0"
		c.Placement.Rebalance, c.Placement.Merges = true, false
		c.Placement.RangeMaxBytes, c.Placement.RangeMinBytes = 128<<10, 32<<10
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	for _, bad := range []*tidekvpb.KeySpace{
		{Name: "x", Mode: "sorted"},
		{Name: "x", Engine: "rocks"},
		{Name: "Bad Name"},
		{Name: "x", Rf: 9},
		{Name: "default"},
	} {
		if _, err := c.CreateKeySpace(ctx, bad); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "key space not created") {
			t.Fatalf("create %v: %v, want an invalid-argument refusal", bad, err)
		}
	}
	orders, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "cache", Mode: "hashed", Rf: 1, Engine: "memory", CapacityPerNode: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if orders.GetId() != 1 || cache.GetId() != 2 || cache.GetIndex() != "btree" {
		t.Fatalf("created %v and %v", orders, cache)
	}
	if _, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "orders", Mode: "hashed"}); err == nil || !strings.Contains(err.Error(), `"orders" exists`) {
		t.Fatalf("second create of orders: %v", err)
	}
	all, err := c.KeySpaces(ctx)
	if err != nil || len(all) != 3 || all[0].GetName() != "default" || all[1].GetMode() != "ordered" || all[2].GetMode() != "hashed" {
		t.Fatalf("key spaces %v, %v", all, err)
	}

	cat := keyspace.NewCatalogue([]keyspace.KeySpace{keyspace.FromAPI(orders), keyspace.FromAPI(cache)})
	cacheLo, cacheHi := keyspace.Span(2)
	eventually(t, 30*time.Second, "ranges split at the key spaces' bounds, each with its replication factor", func() error {
		return checkKeySpaceRanges(ctx, c, cat)
	})

	// One user key, three key spaces.
	def, err := c.KeySpace(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ord, err := c.KeySpace(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	hashed, err := c.KeySpace(ctx, "cache")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		ks *client.KeySpace
		v  string
	}{{def, "in-default"}, {ord, "in-orders"}, {hashed, "in-cache"}} {
		if err := w.ks.Put(ctx, []byte("k"), []byte(w.v)); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: tc.nodes[1].RedisAddr(), DB: 1}) // SELECT 1: orders
	defer rdb.Close()
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "in-orders" {
		t.Fatalf("redis GET k in database 1 = %q, %v", v, err)
	}
	if err := rdb.Set(ctx, "r", "from-redis", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := ord.Get(ctx, []byte("r")); err != nil || string(v) != "from-redis" {
		t.Fatalf("orders r = %q, %v", v, err)
	}
	if keys, _, err := rdb.Scan(ctx, 0, "*", 100).Result(); err != nil || fmt.Sprint(keys) != "[k r]" {
		t.Fatalf("SCAN in orders = %v, %v", keys, err)
	}
	r2 := redis.NewClient(&redis.Options{Addr: tc.nodes[2].RedisAddr(), DB: 2}) // hashed
	defer r2.Close()
	if v, err := r2.Get(ctx, "k").Result(); err != nil || v != "in-cache" {
		t.Fatalf("redis GET k in database 2 = %q, %v", v, err)
	}
	if _, _, err := r2.Scan(ctx, 0, "*", 100).Result(); err == nil || !strings.Contains(err.Error(), `key space "cache" is hashed`) {
		t.Fatalf("SCAN in a hashed key space: %v", err)
	}
	if n, err := r2.Del(ctx, "k").Result(); err != nil || n != 1 {
		t.Fatalf("DEL in a hashed key space = %d, %v", n, err)
	}
	r0 := redis.NewClient(&redis.Options{Addr: tc.nodes[0].RedisAddr()})
	defer r0.Close()
	if keys, _, err := r0.Scan(ctx, 0, "*", 100).Result(); err != nil || fmt.Sprint(keys) != "[k]" {
		t.Fatalf("SCAN in database 0 = %v, %v (the other key spaces' keys must not show)", keys, err)
	}
	if err := r0.Do(ctx, "SELECT", "9").Err(); err == nil || !strings.Contains(err.Error(), "no key space number 9") {
		t.Fatalf("SELECT 9: %v", err)
	}
	if v, err := def.Get(ctx, []byte("k")); err != nil || string(v) != "in-default" {
		t.Fatalf("default k = %q, %v", v, err)
	}
	if _, err := hashed.Scan(ctx, nil, nil, 0); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("scan of a hashed key space: %v", err)
	}
	if kvs, err := ord.Scan(ctx, nil, nil, 0); err != nil || len(kvs) != 2 || string(kvs[0].Key) != "k" {
		t.Fatalf("scan of orders: %v, %v", kvs, err)
	}

	// The hashed key space outgrows Θmax: its ranges split by size at hash
	// values.
	val := bytes.Repeat([]byte("v"), 2<<10)
	const n = 300
	for i := 0; i < n; i++ {
		if err := hashed.Put(ctx, fmt.Appendf(nil, "user%04d", i), val); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the hashed key space splits", func() error {
		rs, err := rangesIn(ctx, c, cacheLo, cacheHi)
		if err != nil || len(rs) < 2 {
			return fmt.Errorf("%d ranges in the hashed key space, %v", len(rs), err)
		}
		return checkKeySpaceRanges(ctx, c, cat)
	})
	rs, err := rangesIn(ctx, c, cacheLo, cacheHi)
	if err != nil {
		t.Fatal(err)
	}

	seen := 0
	codec := keyspace.FromAPI(cache).Codec()
	for _, d := range rs {
		kvs, err := c.Scan(ctx, d.GetStartKey(), d.GetEndKey(), 0)
		if err != nil {
			t.Fatal(err)
		}
		var users []string
		for _, kv := range kvs {
			u, ok := codec.Decode(kv.Key)
			if !ok {
				t.Fatalf("key %x in range %d is not the hashed key space's", kv.Key, d.GetRangeId())
			}
			users = append(users, string(u))
		}
		seen += len(users)
		t.Logf("range %d [%x, %x): %d keys", d.GetRangeId(), d.GetStartKey(), d.GetEndKey(), len(users))
		// Hash order is not the keys' order: a range's keys come from all
		// over the user keys' order, not from one interval of it.
		if len(users) < 30 {
			continue
		}
		if sort.StringsAreSorted(users) {
			t.Fatalf("range %d holds %d keys in user-key order: not placed by hash", d.GetRangeId(), len(users))
		}
		sort.Strings(users)
		if users[0] > "user0050" || users[len(users)-1] < "user0250" {
			t.Fatalf("range %d holds only the user keys from %s to %s", d.GetRangeId(), users[0], users[len(users)-1])
		}
	}
	if seen != n {
		t.Fatalf("ranges of the hashed key space hold %d keys, want %d", seen, n)
	}
}

// rangesIn lists the directory's ranges inside [lo, hi).
func rangesIn(ctx context.Context, c *client.Client, lo, hi []byte) ([]*tidekvpb.RangeDescriptor, error) {
	resp, err := c.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	var out []*tidekvpb.RangeDescriptor
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		if bytes.Compare(d.GetStartKey(), lo) >= 0 && len(d.GetEndKey()) > 0 && bytes.Compare(d.GetEndKey(), hi) <= 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// checkKeySpaceRanges: no range spans a key space boundary, and each has
// its key space's number of voters (the cluster's 3 unless set).
func checkKeySpaceRanges(ctx context.Context, c *client.Client, cat keyspace.Catalogue) error {
	resp, err := c.Ranges(ctx)
	if err != nil {
		return err
	}
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		for _, b := range cat.Boundaries() {
			if bytes.Compare(b, d.GetStartKey()) > 0 && (len(d.GetEndKey()) == 0 || bytes.Compare(b, d.GetEndKey()) < 0) {
				return fmt.Errorf("range %d [%x, %x) spans the boundary %x", d.GetRangeId(), d.GetStartKey(), d.GetEndKey(), b)
			}
		}
		want := 3
		if k, ok := cat.ByID(keyspace.Of(d.GetStartKey())); ok && k.RF > 0 {
			want = k.RF
		}
		voters := 0
		for _, r := range d.GetReplicas() {
			if r.GetType() == tidekvpb.ReplicaType_VOTER {
				voters++
			}
		}
		if voters != want {
			return fmt.Errorf("range %d [%x, %x) has %d voters, want %d", d.GetRangeId(), d.GetStartKey(), d.GetEndKey(), voters, want)
		}
	}
	return nil
}
