package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/ksconfig"
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
		{Name: "x", OnFull: "spill"},
		{Name: "x", OnFull: "grow"}, // grows before a capacity it does not have
	} {
		if _, err := c.CreateKeySpace(ctx, bad); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "key space not created") {
			t.Fatalf("create %v: %v, want an invalid-argument refusal", bad, err)
		}
	}
	orders, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "cache", Mode: "hashed", Rf: 1, Engine: "memory", CapacityPerNode: 1 << 30, OnFull: "grow"})
	if err != nil {
		t.Fatal(err)
	}
	if orders.GetId() != 1 || cache.GetId() != 2 || cache.GetIndex() != "btree" || orders.GetOnFull() != "evict" || cache.GetOnFull() != "grow" {
		t.Fatalf("created %v and %v", orders, cache)
	}
	if _, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "orders", Mode: "hashed"}); err == nil || !strings.Contains(err.Error(), `"orders" exists`) {
		t.Fatalf("second create of orders: %v", err)
	}
	all, err := c.KeySpaces(ctx)
	if err != nil || len(all) != 3 || all[0].GetName() != "default" || all[1].GetMode() != "ordered" || all[2].GetMode() != "hashed" || all[2].GetOnFull() != "grow" {
		t.Fatalf("key spaces %v, %v", all, err)
	}

	cat := ksconfig.NewCatalogue([]ksconfig.KeySpace{ksconfig.FromAPI(orders), ksconfig.FromAPI(cache)})
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
	checkHashOrderScan(ctx, t, hashed)
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
	checkKeySpaceRequests(ctx, t, tc.nodes[0], c, ksconfig.FromAPI(orders).Codec())

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

	// Which range each key is in: the ranges split at the keys halving
	// their data, so each holds some, and since the keys are placed by
	// hash, each holds keys from all over the user keys' order.
	codec := ksconfig.FromAPI(cache).Codec()
	users := map[uint64][]string{}
	for i := 0; i < n; i++ {
		u := fmt.Appendf(nil, "user%04d", i)
		if v, err := hashed.Get(ctx, u); err != nil || !bytes.Equal(v, val) {
			t.Fatalf("get %s: %d bytes, %v", u, len(v), err)
		}
		stored := codec.Encode(u)
		for _, d := range rs {
			if bytes.Compare(stored, d.GetStartKey()) >= 0 && bytes.Compare(stored, d.GetEndKey()) < 0 {
				users[d.GetRangeId()] = append(users[d.GetRangeId()], string(u))
			}
		}
	}
	for _, d := range rs {
		us := users[d.GetRangeId()]
		t.Logf("range %d [%x, %x): %d keys", d.GetRangeId(), d.GetStartKey(), d.GetEndKey(), len(us))
		if len(us) == 0 {
			t.Fatalf("range %d [%x, %x) holds none of the keys: not split at the data's median", d.GetRangeId(), d.GetStartKey(), d.GetEndKey())
		}
		if len(us) < 30 {
			continue
		}
		sort.Strings(us)
		if us[0] > "user0050" || us[len(us)-1] < "user0250" {
			t.Fatalf("range %d holds only the user keys from %s to %s: not placed by hash", d.GetRangeId(), us[0], us[len(us)-1])
		}
	}
}

// checkKeySpaceRequests: a node refuses a request whose keys are not those
// of the key space it names, names no key space that exists, or scans a
// hashed one; a request of the default key space cannot reach another's
// keys, and its scans end before them.
func checkKeySpaceRequests(ctx context.Context, t *testing.T, s *Server, c *client.Client, orders keyspace.Codec) {
	t.Helper()
	kv := &kvService{s: s}
	hashedKey := keyspace.Codec{ID: 2, Mode: keyspace.Hashed}.Encode([]byte("k"))
	forged := append(keyspace.Prefix(2), make([]byte, 8)...)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"a plain key in orders", get(ctx, kv, "orders", []byte("k")), `is not a key of key space "orders"`},
		{"a hashed key in orders", get(ctx, kv, "orders", hashedKey), `is not a key of key space "orders"`},
		{"a key at the wrong hash", get(ctx, kv, "cache", append(forged, 'k')), `is not a key of key space "cache"`},
		{"an unknown key space", get(ctx, kv, "nope", []byte("k")), `no key space "nope"`},
		{"another key space's key in the default one", get(ctx, kv, "", orders.Encode([]byte("k"))), "reserved for named key spaces"},
		{"a scan of a hashed key space", scan(ctx, kv, "cache", keyspace.Prefix(2)), `key space "cache" is hashed`},
		{"a hash-order scan from outside the key space", hashOrderScan(ctx, kv, "cache", keyspace.Prefix(3)), `lies outside key space "cache"`},
		{"a scan of orders from a default key", scan(ctx, kv, "orders", []byte("a")), `is not a key of key space "orders"`},
	} {
		if status.Code(c.err) != codes.InvalidArgument || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want InvalidArgument naming %q", c.name, c.err, c.want)
		}
	}
	if err := c.Put(ctx, orders.Encode([]byte("x")), []byte("v")); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("a default-key-space put into orders' keys: %v", err)
	}
	if kvs, err := c.Scan(ctx, nil, nil, 0); err != nil || len(kvs) != 1 || string(kvs[0].Key) != "k" {
		t.Errorf("a default-key-space scan of everything = %v, %v; want only its own key", kvs, err)
	}
}

func get(ctx context.Context, kv *kvService, ks string, key []byte) error {
	_, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: key, Keyspace: ks})
	return err
}

func hashOrderScan(ctx context.Context, kv *kvService, ks string, start []byte) error {
	_, err := kv.Scan(ctx, &tidekvpb.ScanRequest{StartKey: start, Keyspace: ks, HashOrder: true})
	return err
}

// checkHashOrderScan: pages of a hashed key space in its stored order list
// every key once, in the order of their hashes.
func checkHashOrderScan(ctx context.Context, t *testing.T, ks *client.KeySpace) {
	t.Helper()
	want := map[string]bool{"k": true}
	for i := range 20 {
		k := fmt.Sprintf("h%02d", i)
		if err := ks.Put(ctx, []byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
		want[k] = true
	}
	var after []byte
	got := map[string]bool{}
	for {
		page, err := ks.ScanHashOrder(ctx, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range page {
			if after != nil && keyspace.Hash(kv.Key) < keyspace.Hash(after) || got[string(kv.Key)] {
				t.Fatalf("hash-order scan returned %q after %q", kv.Key, after)
			}
			got[string(kv.Key)], after = true, kv.Key
		}
		if len(page) < 7 {
			break
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("hash-order scan listed %v, want %v", got, want)
	}
}

func scan(ctx context.Context, kv *kvService, ks string, start []byte) error {
	_, err := kv.Scan(ctx, &tidekvpb.ScanRequest{StartKey: start, Keyspace: ks})
	return err
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
func checkKeySpaceRanges(ctx context.Context, c *client.Client, cat ksconfig.Catalogue) error {
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
