package resp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// start serves kv on 127.0.0.1:0 and returns a go-redis client for it.
func start(t *testing.T, kv KV, mod func(*Config), opt func(*redis.Options)) (*Server, *redis.Client) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ListenAddr = "127.0.0.1:0"
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve() }()
	o := &redis.Options{Addr: s.Addr().String(), MaxRetries: -1}
	if opt != nil {
		opt(o)
	}
	rc := redis.NewClient(o)
	t.Cleanup(func() {
		rc.Close()
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return s, rc
}

// must returns v, or panics (failing the test with a stack trace) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func wantErr(t *testing.T, err error, prefix string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("error = %v, want prefix %q", err, prefix)
	}
}

func eq[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestStrings(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), nil, nil)

	eq(t, must(rc.Ping(ctx).Result()), "PONG")
	eq(t, must(rc.Echo(ctx, "hi").Result()), "hi")
	eq(t, must(rc.Set(ctx, "a", "1", 0).Result()), "OK")
	eq(t, must(rc.Get(ctx, "a").Result()), "1")
	if _, err := rc.Get(ctx, "missing").Result(); err != redis.Nil {
		t.Fatalf("get missing: %v", err)
	}
	eq(t, must(rc.Set(ctx, "empty", "", 0).Result()), "OK")
	eq(t, must(rc.Get(ctx, "empty").Result()), "")
	eq(t, must(rc.Exists(ctx, "a", "missing", "empty", "a").Result()), int64(3))
	eq(t, must(rc.Type(ctx, "a").Result()), "string")
	eq(t, must(rc.Del(ctx, "a", "missing", "empty").Result()), int64(2))
	eq(t, must(rc.Exists(ctx, "a").Result()), int64(0))

	// NX / XX / GET.
	eq(t, must(rc.SetNX(ctx, "n", "1", 0).Result()), true)
	eq(t, must(rc.SetNX(ctx, "n", "2", 0).Result()), false)
	eq(t, must(rc.Get(ctx, "n").Result()), "1")
	eq(t, must(rc.SetXX(ctx, "x", "1", 0).Result()), false)
	eq(t, must(rc.Exists(ctx, "x").Result()), int64(0))
	eq(t, must(rc.SetXX(ctx, "n", "3", 0).Result()), true)
	eq(t, must(rc.Get(ctx, "n").Result()), "3")
	eq(t, must(rc.SetArgs(ctx, "n", "4", redis.SetArgs{Get: true}).Result()), "3")
	if _, err := rc.SetArgs(ctx, "new", "v", redis.SetArgs{Get: true}).Result(); err != redis.Nil {
		t.Fatalf("SET GET on missing key: %v", err)
	}
	eq(t, must(rc.Get(ctx, "new").Result()), "v")
	eq(t, must(rc.SetArgs(ctx, "n", "5", redis.SetArgs{Mode: "NX", Get: true}).Result()), "4")
	eq(t, must(rc.Get(ctx, "n").Result()), "4")
	eq(t, must(rc.GetSet(ctx, "n", "6").Result()), "4")
	eq(t, must(rc.Get(ctx, "n").Result()), "6")
	eq(t, must(rc.Set(ctx, "n", "7", time.Minute).Result()), "OK") // EX 60 (expiry_test.go)
	eq(t, must(rc.TTL(ctx, "n").Result()), time.Minute)
	wantErr(t, rc.Do(ctx, "SET", "n", "7", "NX", "XX").Err(), "ERR syntax error")
	wantErr(t, rc.Do(ctx, "SET", "n", "7", "BOGUS").Err(), "ERR syntax error")
	wantErr(t, rc.Set(ctx, "n", string(hashMarker), 0).Err(), "ERR value is reserved")

	// Counters.
	eq(t, must(rc.Incr(ctx, "c").Result()), int64(1))
	eq(t, must(rc.IncrBy(ctx, "c", 10).Result()), int64(11))
	eq(t, must(rc.Decr(ctx, "c").Result()), int64(10))
	eq(t, must(rc.DecrBy(ctx, "c", 15).Result()), int64(-5))
	eq(t, must(rc.Get(ctx, "c").Result()), "-5")
	rc.Set(ctx, "s", "abc", 0)
	wantErr(t, rc.Incr(ctx, "s").Err(), "ERR value is not an integer or out of range")
	rc.Set(ctx, "s", " 1", 0)
	wantErr(t, rc.Incr(ctx, "s").Err(), "ERR value is not an integer or out of range")
	wantErr(t, rc.Do(ctx, "INCRBY", "c", "x").Err(), "ERR value is not an integer or out of range")
	rc.Set(ctx, "big", "9223372036854775807", 0)
	wantErr(t, rc.Incr(ctx, "big").Err(), "ERR increment or decrement would overflow")

	// Keys with NUL bytes are binary safe.
	eq(t, must(rc.Set(ctx, "k\x00\x01z", "nul", 0).Result()), "OK")
	eq(t, must(rc.Get(ctx, "k\x00\x01z").Result()), "nul")

	// An empty key is rejected by the store: ERR with its message.
	wantErr(t, rc.Set(ctx, "", "v", 0).Err(), "ERR invalid argument")
}

func TestIncrConcurrent(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), nil, func(o *redis.Options) { o.PoolSize = 16 })
	const n, m = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range m {
				if err := rc.Incr(ctx, "ctr").Err(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	eq(t, must(rc.Get(ctx, "ctr").Int64()), int64(n*m))
}

func TestHashes(t *testing.T) {
	ctx := context.Background()
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)

	eq(t, must(rc.HSet(ctx, "h", "f1", "v1", "f2", "v2").Result()), int64(2))
	eq(t, must(rc.HSet(ctx, "h", "f2", "v2b", "f3", "v3").Result()), int64(1))
	eq(t, must(rc.HSet(ctx, "h", "f4", "a", "f4", "b").Result()), int64(1))
	eq(t, must(rc.HGet(ctx, "h", "f2").Result()), "v2b")
	eq(t, must(rc.HGet(ctx, "h", "f4").Result()), "b")
	if err := rc.HGet(ctx, "h", "nope").Err(); err != redis.Nil {
		t.Fatalf("hget missing field: %v", err)
	}
	if err := rc.HGet(ctx, "nohash", "f").Err(); err != redis.Nil {
		t.Fatalf("hget missing hash: %v", err)
	}
	got := must(rc.HMGet(ctx, "h", "f1", "nope", "f3").Result())
	if fmt.Sprint(got) != "[v1 <nil> v3]" {
		t.Fatalf("hmget = %v", got)
	}
	all := must(rc.HGetAll(ctx, "h").Result())
	if fmt.Sprint(all) != "map[f1:v1 f2:v2b f3:v3 f4:b]" {
		t.Fatalf("hgetall = %v", all)
	}
	eq(t, must(rc.HLen(ctx, "h").Result()), int64(4))
	eq(t, fmt.Sprint(must(rc.HKeys(ctx, "h").Result())), "[f1 f2 f3 f4]")
	eq(t, fmt.Sprint(must(rc.HVals(ctx, "h").Result())), "[v1 v2b v3 b]")
	eq(t, must(rc.HExists(ctx, "h", "f1").Result()), true)
	eq(t, must(rc.HExists(ctx, "h", "zz").Result()), false)
	eq(t, must(rc.Type(ctx, "h").Result()), "hash")
	eq(t, must(rc.Exists(ctx, "h").Result()), int64(1))
	eq(t, must(rc.HMSet(ctx, "h", "f5", "v5").Result()), true)
	eq(t, must(rc.HLen(ctx, "h").Result()), int64(5))

	// HGETALL is one range scan.
	kv.mu.Lock()
	before := kv.scans
	kv.mu.Unlock()
	rc.HGetAll(ctx, "h")
	kv.mu.Lock()
	eq(t, kv.scans-before, 1)
	kv.mu.Unlock()

	// Wrong types, both ways.
	wantErr(t, rc.Get(ctx, "h").Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
	wantErr(t, rc.Incr(ctx, "h").Err(), "WRONGTYPE")
	wantErr(t, rc.GetSet(ctx, "h", "x").Err(), "WRONGTYPE")
	rc.Set(ctx, "str", "v", 0)
	wantErr(t, rc.HSet(ctx, "str", "f", "v").Err(), "WRONGTYPE")
	wantErr(t, rc.HGet(ctx, "str", "f").Err(), "WRONGTYPE")
	wantErr(t, rc.HGetAll(ctx, "str").Err(), "WRONGTYPE")
	wantErr(t, rc.HDel(ctx, "str", "f").Err(), "WRONGTYPE")
	eq(t, fmt.Sprint(must(rc.MGet(ctx, "h", "str").Result())), "[<nil> v]")

	// No collision between a hash field and a string whose key looks like
	// the naive encoding, nor between nested-looking hash names.
	rc.Set(ctx, "h\x00f1", "plain", 0)
	rc.Set(ctx, "h\x00\x01f1", "plain2", 0)
	eq(t, must(rc.HSet(ctx, "h\x00", "f1", "inner").Result()), int64(1))
	eq(t, must(rc.HGet(ctx, "h", "f1").Result()), "v1")
	eq(t, must(rc.Get(ctx, "h\x00f1").Result()), "plain")
	eq(t, must(rc.Get(ctx, "h\x00\x01f1").Result()), "plain2")
	eq(t, must(rc.HLen(ctx, "h").Result()), int64(5))
	eq(t, must(rc.HLen(ctx, "h\x00").Result()), int64(1))

	// HDEL; the last field takes the hash with it.
	eq(t, must(rc.HDel(ctx, "h", "f1", "f1", "nope").Result()), int64(1))
	eq(t, must(rc.HDel(ctx, "h", "f2", "f3", "f4").Result()), int64(3))
	eq(t, must(rc.HDel(ctx, "h", "f5").Result()), int64(1))
	eq(t, must(rc.Exists(ctx, "h").Result()), int64(0))
	eq(t, must(rc.HLen(ctx, "h").Result()), int64(0))
	eq(t, len(must(rc.HGetAll(ctx, "h").Result())), 0)

	// SET over a hash replaces it (as in Redis); a new hash under the same
	// key does not see the old fields. DEL removes a hash and its fields.
	rc.HSet(ctx, "h2", "a", "1", "b", "2")
	eq(t, must(rc.Set(ctx, "h2", "now a string", 0).Result()), "OK")
	eq(t, must(rc.Get(ctx, "h2").Result()), "now a string")
	wantErr(t, rc.HGet(ctx, "h2", "a").Err(), "WRONGTYPE")
	rc.Del(ctx, "h2")
	eq(t, must(rc.HSet(ctx, "h2", "c", "3").Result()), int64(1))
	eq(t, fmt.Sprint(must(rc.HGetAll(ctx, "h2").Result())), "map[c:3]")
	eq(t, must(rc.Del(ctx, "h2").Result()), int64(1))
	kv.mu.Lock()
	for k := range kv.m {
		if strings.HasPrefix(k, "h2") {
			t.Errorf("left behind after DEL: %q", k)
		}
	}
	kv.mu.Unlock()
}

// TestHSetIsOneStep: HSET is one guarded write, with no read before it,
// whether it creates a hash (dropping fields a lost marker left behind),
// updates one, or meets a string; a hash whose keys span ranges falls back
// to reading, then writing.
func TestHSetIsOneStep(t *testing.T) {
	ctx := context.Background()
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)
	kv.mu.Lock()
	kv.m[string(fieldKey([]byte("h"), []byte("stale")))] = []byte("x") // no marker: not a field
	kv.mu.Unlock()
	steps := func() (guarded, reads, scans int) {
		kv.mu.Lock()
		defer kv.mu.Unlock()
		return kv.guarded, kv.reads, kv.scans
	}
	eq(t, must(rc.HSet(ctx, "h", "f1", "v1", "f2", "v2").Result()), int64(2))
	eq(t, must(rc.HSet(ctx, "h", "f2", "w2", "f3", "v3").Result()), int64(1))
	rc.Set(ctx, "str", "v", 0)
	wantErr(t, rc.HSet(ctx, "str", "f", "v").Err(), "WRONGTYPE")
	eq(t, must(rc.HMSet(ctx, "h", "f4", "v4").Result()), true)
	g, r, sc := steps()
	if g != 4 || r != 0 || sc != 0 {
		t.Fatalf("four HSETs took %d guarded writes, %d reads and %d scans; want 4, 0, 0", g, r, sc)
	}
	eq(t, fmt.Sprint(must(rc.HGetAll(ctx, "h").Result())), "map[f1:v1 f2:w2 f3:v3 f4:v4]")
	eq(t, must(rc.Get(ctx, "str").Result()), "v")

	kv.mu.Lock()
	kv.splitAt = fieldKey([]byte("hs"), []byte("m"))
	kv.mu.Unlock()
	eq(t, must(rc.HSet(ctx, "hs", "a", "1", "z", "26").Result()), int64(2))
	eq(t, must(rc.HSet(ctx, "hs", "a", "2", "y", "25").Result()), int64(1))
	eq(t, fmt.Sprint(must(rc.HGetAll(ctx, "hs").Result())), "map[a:2 y:25 z:26]")
	if _, r2, _ := steps(); r2 == r {
		t.Fatal("HSET on a hash across ranges did not read first")
	}
}

// go-ycsb's redis driver: HSET with ten fields, HMGET of ten fields.
func TestYCSBStyleHashes(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), nil, nil)
	var args []any
	var fields []string
	for i := range 10 {
		args = append(args, fmt.Sprintf("field%d", i), fmt.Sprintf("value%d", i))
		fields = append(fields, fmt.Sprintf("field%d", i))
	}
	eq(t, must(rc.HSet(ctx, "user1", args...).Result()), int64(10))
	vals := must(rc.HMGet(ctx, "user1", fields...).Result())
	for i, v := range vals {
		eq(t, v.(string), fmt.Sprintf("value%d", i))
	}
	eq(t, must(rc.HSet(ctx, "user1", "field3", "new").Result()), int64(0))
	eq(t, must(rc.HGet(ctx, "user1", "field3").Result()), "new")
}

func TestMGetMSet(t *testing.T) {
	ctx := context.Background()
	kv := newFakeKV()
	_, rc := start(t, kv, func(c *Config) { c.MaxBatchKeys = 3 }, nil)
	eq(t, must(rc.MSet(ctx, "a", "1", "b", "2", "c", "3", "d", "4").Result()), "OK")
	eq(t, fmt.Sprint(must(rc.MGet(ctx, "a", "x", "b", "c", "d").Result())), "[1 <nil> 2 3 4]")
	wantErr(t, rc.Do(ctx, "MSET", "a", "1", "b").Err(), "ERR wrong number of arguments for 'mset' command")

	// Keys in two ranges: the Write is refused, MSET runs as a
	// transaction.
	kv.mu.Lock()
	kv.splitAt = []byte("m")
	kv.mu.Unlock()
	eq(t, must(rc.MSet(ctx, "a", "10", "z", "26").Result()), "OK")
	eq(t, fmt.Sprint(must(rc.MGet(ctx, "a", "z").Result())), "[10 26]")
	// All or none, as in Redis: a key TideKV refuses (an empty one) fails
	// the whole MSET, across ranges and past MaxBatchKeys keys alike.
	wantErr(t, rc.MSet(ctx, "a", "11", "z", "27", "", "x").Err(), "ERR invalid argument: empty key")
	wantErr(t, rc.MSet(ctx, "b", "11", "c", "11", "d", "11", "", "x").Err(), "ERR invalid argument: empty key")
	eq(t, fmt.Sprint(must(rc.MGet(ctx, "a", "z", "b", "c", "d").Result())), "[10 26 2 3 4]")
}

func TestScanCoversAllKeys(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), nil, nil)
	want := map[string]bool{}
	for i := range 250 {
		k := fmt.Sprintf("key:%03d", i)
		rc.Set(ctx, k, "v", 0)
		want[k] = true
	}
	for i := range 60 {
		rc.HSet(ctx, "key:100h", fmt.Sprintf("f%d", i), "v")
	}
	want["key:100h"] = true
	rc.Set(ctx, "nul\x00key", "v", 0)
	want["nul\x00key"] = true

	for _, count := range []int64{1, 7, 100, 10000} {
		seen := map[string]int{}
		var cursor uint64
		for calls := 0; ; calls++ {
			if calls > 1000 {
				t.Fatal("SCAN does not terminate")
			}
			keys, next, err := rc.Scan(ctx, cursor, "", count).Result()
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(keys)) > count {
				t.Fatalf("COUNT %d: got %d keys", count, len(keys))
			}
			for _, k := range keys {
				seen[k]++
			}
			if next == 0 {
				break
			}
			cursor = next
		}
		if len(seen) != len(want) {
			t.Fatalf("COUNT %d: saw %d keys, want %d", count, len(seen), len(want))
		}
		for k, n := range seen {
			if !want[k] || n != 1 {
				t.Fatalf("COUNT %d: key %q seen %d times (expected: %v)", count, k, n, want[k])
			}
		}
	}

	// MATCH and TYPE through the iterator helper.
	var matched []string
	it := rc.Scan(ctx, 0, "key:1[0-1]?", 20).Iterator()
	for it.Next(ctx) {
		matched = append(matched, it.Val())
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	eq(t, len(matched), 20)
	keys, _ := must2(t)(rc.ScanType(ctx, 0, "", 10000, "hash").Result())
	eq(t, fmt.Sprint(keys), "[key:100h]")

	wantErr(t, rc.Do(ctx, "SCAN", "12345").Err(), "ERR invalid cursor")
	wantErr(t, rc.Do(ctx, "SCAN", "abc").Err(), "ERR invalid cursor")
}

func must2(t *testing.T) func([]string, uint64, error) ([]string, uint64) {
	return func(k []string, c uint64, err error) ([]string, uint64) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return k, c
	}
}

func TestRange(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), func(c *Config) { c.MaxScanCount = 50 }, nil)
	for _, k := range []string{"d", "a", "c", "e", "b", "ca"} {
		rc.Set(ctx, k, "v"+k, 0)
	}
	rc.HSet(ctx, "cb", "f1", "x", "f2", "y") // hashes are skipped

	rng := func(args ...any) string {
		t.Helper()
		v, err := rc.Do(ctx, append([]any{"TKV.RANGE"}, args...)...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(v)
	}
	eq(t, rng("a", ""), "[a va b vb c vc ca vca d vd e ve]")
	eq(t, rng("b", "d"), "[b vb c vc ca vca]")
	eq(t, rng("b", "", "LIMIT", 2), "[b vb c vc]")
	eq(t, rng("c", "z", "limit", 3), "[c vc ca vca d vd]")
	eq(t, rng("d", "b"), "[]")
	wantErr(t, rc.Do(ctx, "TKV.RANGE", "a", "", "LIMIT", 0).Err(), "ERR LIMIT must be between 1 and 50")
	wantErr(t, rc.Do(ctx, "TKV.RANGE", "a", "", "LIMIT", 51).Err(), "ERR LIMIT must be between 1 and 50")
	wantErr(t, rc.Do(ctx, "TKV.RANGE", "a", "", "LIMIT").Err(), "ERR syntax error")
	wantErr(t, rc.Do(ctx, "TKV.RANGE", "a").Err(), "ERR wrong number of arguments for 'tkv.range' command")
}

func TestAuth(t *testing.T) {
	ctx := context.Background()
	s, noPass := start(t, newFakeKV(), func(c *Config) { c.Auth = users{"default": {"s3cret", AccessWrite}} }, nil)
	wantErr(t, noPass.Ping(ctx).Err(), "NOAUTH Authentication required.")
	wantErr(t, noPass.Get(ctx, "a").Err(), "NOAUTH Authentication required.")

	// go-redis sends HELLO 3 with AUTH.
	good := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Password: "s3cret"})
	defer good.Close()
	eq(t, must(good.Ping(ctx).Result()), "PONG")
	eq(t, must(good.Set(ctx, "a", "1", 0).Result()), "OK")

	bad := redis.NewClient(&redis.Options{Addr: s.Addr().String(), Password: "wrong", MaxRetries: -1})
	defer bad.Close()
	wantErr(t, bad.Ping(ctx).Err(), "WRONGPASS")

	// Without a configured password AUTH is an error.
	_, open := start(t, newFakeKV(), nil, nil)
	wantErr(t, open.Do(ctx, "AUTH", "x").Err(), "ERR AUTH <password> called without any password configured")
}

func TestErrorsAndMisc(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), nil, func(o *redis.Options) { o.ClientName = "tester" })
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"xyz"}, "ERR unknown command 'xyz'"},
		{[]any{"xyz", "a"}, "ERR unknown command 'xyz', with args beginning with: 'a'"},
		{[]any{"GET"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"get", "a", "b"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"HSET", "h", "f"}, "ERR wrong number of arguments for 'hset' command"},
		{[]any{"HSET", "h", "f", "v", "g"}, "ERR wrong number of arguments for 'hset' command"},
		{[]any{"SELECT", "1"}, "ERR DB index is out of range"},
		{[]any{"SELECT", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"CLIENT", "BOGUS"}, "ERR unknown subcommand 'BOGUS'"},
		{[]any{"CLIENT", "KILL"}, "ERR wrong number of arguments for 'client|kill' command"},
		{[]any{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
		{[]any{"PING", "a", "b"}, "ERR wrong number of arguments for 'ping' command"},
	} {
		wantErr(t, rc.Do(ctx, tc.args...).Err(), tc.want)
	}
	eq(t, must(rc.Do(ctx, "SELECT", "0").Text()), "OK")
	eq(t, must(rc.Do(ctx, "PING", "hello").Text()), "hello")
	eq(t, must(rc.ClientGetName(ctx).Result()), "tester")
	if id := must(rc.ClientID(ctx).Result()); id <= 0 {
		t.Fatalf("client id %d", id)
	}
	info := must(rc.Info(ctx).Result())
	if !strings.Contains(info, "# Server") || !strings.Contains(info, "redis_version:7.0.0-tidekv") {
		t.Fatalf("info = %q", info)
	}
	if v := must(rc.Do(ctx, "COMMAND").Slice()); len(v) != len(commands) {
		t.Fatalf("COMMAND describes %d commands, the table has %d", len(v), len(commands))
	}
	eq(t, fmt.Sprint(must(rc.ConfigGet(ctx, "save").Result())), "map[save:]")
	hello := must(rc.Do(ctx, "HELLO", "2").Slice())
	eq(t, fmt.Sprint(hello[:6]), "[server redis version 7.0.0-tidekv proto 2]")
}

func TestKVErrorMapping(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		want string
	}{
		// Every overload refusal is one TRYAGAIN form, the node's hint or
		// DefaultRetryAfter in it; contention is no overload.
		{fmt.Errorf("tidekv: %w", ErrOverloaded), "TRYAGAIN overloaded, retry after 20 ms"},
		{fmt.Errorf("routed: %w", &OverloadedError{RetryAfter: 150 * time.Millisecond}), "TRYAGAIN overloaded, retry after 150 ms"},
		{&OverloadedError{}, "TRYAGAIN overloaded, retry after 20 ms"},
		{fmt.Errorf("%w: key %q", errContention, "k"), "ERR too much contention on the key, retry"},
		{fmt.Errorf("%w: %w", ErrAmbiguous, fmt.Errorf("tidekv: ambiguous result: put: %w", context.DeadlineExceeded)), "ERR ambiguous result: the write may or may not have been applied"},
		{fmt.Errorf("%w: tidekv: unavailable: get: giving up after 10 attempts: rpc error", ErrUnavailable), "ERR unavailable: no replica could serve the command, retry"},
		{fmt.Errorf("tidekv: get: %w (last error: rpc error)", context.DeadlineExceeded), "ERR timeout: the command did not complete in time"},
		{fmt.Errorf("%w: value too large (limit 1 MiB)", ErrInvalidArgument), "ERR invalid argument: value too large (limit 1 MiB)"},
		{errors.New("boom\r\nline"), "ERR boom  line"},
	} {
		_, rc := start(t, errKV{newFakeKV(), tc.err}, nil, nil)
		for _, err := range []error{rc.Get(ctx, "k").Err(), rc.Set(ctx, "k", "v", 0).Err()} {
			if err == nil || err.Error() != tc.want {
				t.Errorf("error for %v: %v, want %q", tc.err, err, tc.want)
			}
		}
	}
}

func TestPipeline(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), nil, nil)
	pipe := rc.Pipeline()
	var cmds []redis.Cmder
	for i := range 100 {
		switch i % 4 {
		case 0:
			cmds = append(cmds, pipe.Set(ctx, fmt.Sprintf("p%d", i), i, 0))
		case 1:
			cmds = append(cmds, pipe.Get(ctx, fmt.Sprintf("p%d", i-1)))
		case 2:
			cmds = append(cmds, pipe.Incr(ctx, "pctr"))
		case 3:
			cmds = append(cmds, pipe.Echo(ctx, fmt.Sprint(i)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	incr := int64(0)
	for i, c := range cmds {
		switch i % 4 {
		case 0:
			eq(t, c.(*redis.StatusCmd).Val(), "OK")
		case 1:
			eq(t, c.(*redis.StringCmd).Val(), fmt.Sprint(i-1))
		case 2:
			incr++
			eq(t, c.(*redis.IntCmd).Val(), incr)
		case 3:
			eq(t, c.(*redis.StringCmd).Val(), fmt.Sprint(i))
		}
	}
}

// Raw protocol: HELLO 3 → RESP3, inline commands, QUIT closes.
func TestRawProtocol(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(c, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\nPING\r\nSET k v\r\nGET k\r\nQUIT\r\n")
	r := bufio.NewReader(c)
	var lines []string
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			break
		}
		lines = append(lines, strings.TrimRight(l, "\r\n"))
	}
	eq(t, strings.Join(lines, "|"), "%7|$6|server|$5|redis|$7|version|$12|7.0.0-tidekv|$5|proto|:3|$2|id|:1|$4|mode|$10|standalone|$4|role|$6|master|$7|modules|*0|+PONG|+OK|$1|v|+OK")
}

func TestEncoding(t *testing.T) {
	keys := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "a", "a\x00", "a\x00b", "a\x00\xff", "a\x01", "b"}
	sort.Strings(keys)
	for i := 1; i < len(keys); i++ {
		a, b := encKey([]byte(keys[i-1])), encKey([]byte(keys[i]))
		if bytes.Compare(a, b) >= 0 {
			t.Errorf("order not kept: %q %q -> %q %q", keys[i-1], keys[i], a, b)
		}
	}
	for _, k := range keys {
		u, _, isField := decodeKey(encKey([]byte(k)))
		if isField || string(u) != k {
			t.Errorf("decode(enc(%q)) = %q, %v", k, u, isField)
		}
		for _, f := range []string{"", "f", "\x00"} {
			u, gf, isField := decodeKey(fieldKey([]byte(k), []byte(f)))
			if !isField || string(u) != k || string(gf) != f {
				t.Errorf("decode(field(%q,%q)) = %q %q %v", k, f, u, gf, isField)
			}
			fk := fieldKey([]byte(k), []byte(f))
			if bytes.Compare(fk, fieldPrefix([]byte(k))) < 0 || bytes.Compare(fk, fieldsEnd([]byte(k))) >= 0 {
				t.Errorf("field key %q outside its hash's span", fk)
			}
		}
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*c", "abc", true},
		{"a*d", "abc", false}, {"?bc", "abc", true}, {"??", "a", false},
		{"[ab]x", "bx", true}, {"[^ab]x", "bx", false}, {"[a-c]", "b", true},
		{"[a-c]", "d", false}, {`\*`, "*", true}, {`\*`, "a", false},
		{"key:1[0-1]?", "key:105", true}, {"key:1[0-1]?", "key:125", false},
		{"a/b*", "a/bc/d", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"*a*", "bab", true},
		{"*ab", "aab", true}, {"a**b", "ab", true}, {"a*?", "a", false}, {"a*?", "ab", true},
		{`a\`, `a\`, true}, {`a\`, "a", false}, {`a\\`, `a\`, true}, {`*\*`, "ab", false}, {"[abc", "a", false}, {"[abc", "", false},
		{"*[x]", "abx", true}, {`*\*`, "ab*", true}, {"", "", true}, {"", "a", false},
		{strings.Repeat("a*", 20) + "b", strings.Repeat("a", 40), false},
		{strings.Repeat("a*", 20) + "b", strings.Repeat("a", 40) + "b", true},
	} {
		if got := globMatch([]byte(tc.p), []byte(tc.s)); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*Config){
		func(c *Config) { c.ListenAddr = "" },
		func(c *Config) { c.RequestTimeout = 0 },
		func(c *Config) { c.MaxScanCount = 0 },
		func(c *Config) { c.MaxBatchKeys = 0 },
		func(c *Config) { c.MaxConns = -1 },
		func(c *Config) { c.MaxBulkLen = 0 },
		func(c *Config) { c.MaxArgs = 0 },
		func(c *Config) { c.MaxInlineLen = 0 },
		func(c *Config) { c.MaxCommandLen = c.MaxBulkLen - 1 },
		func(c *Config) { c.MaxOutputBuffer = 0 },
		func(c *Config) { c.OutputTimeout = 0 },
		func(c *Config) { c.CursorTTL = 0 },
		func(c *Config) { c.MaxCursors = 0 },
		func(c *Config) { c.CASAttempts = 0 },
	} {
		c := DefaultConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("invalid config accepted: %+v", c)
		}
	}
}

func TestObserverSeesCommandsAndErrors(t *testing.T) {
	s, rc := start(t, newFakeKV(), nil, nil)
	type seen struct {
		cmd    string
		failed bool
	}
	var mu sync.Mutex
	var got []seen
	s.SetObserver(func(cmd string, took time.Duration, failed bool) {
		mu.Lock()
		got = append(got, seen{cmd, failed})
		mu.Unlock()
	})
	ctx := context.Background()
	must(rc.Set(ctx, "a", "1", 0).Result())
	wantErr(t, rc.HSet(ctx, "a", "f", "v").Err(), "WRONGTYPE")
	wantErr(t, rc.Do(ctx, "NOSUCHCMD").Err(), "ERR unknown command")
	mu.Lock()
	defer mu.Unlock()
	// go-redis's connection handshake comes first: HELLO 3, CLIENT
	// MAINT_NOTIFICATIONS (refused, an unknown subcommand, as by Redis 7.0),
	// then two CLIENT SETINFO. Unknown commands are not observed: their
	// names would make the metric's label set unbounded.
	want := []seen{{"hello", false}, {"client", true}, {"client", false}, {"client", false}, {"set", false}, {"hset", true}}
	if !slices.Equal(got, want) {
		t.Fatalf("observed %v, want %v", got, want)
	}
}
