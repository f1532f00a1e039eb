package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// TestExpiryEndToEnd: Redis expiry commands on keys of a range the node
// leads (in process) and of one led elsewhere (routed through the Go
// client and gRPC), and the Go client's TTL calls; time passes by moving
// every node's clock together.
func TestExpiryEndToEnd(t *testing.T) {
	clock := &raftstore.SkewClock{}
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Redis.ListenAddr = "127.0.0.1:0"
		c.Raft.Clock = clock
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lh := splitLedApart(t, tc, c, "m")
	rdb := redis.NewClient(&redis.Options{Addr: tc.server(lh).RedisAddr()})
	defer rdb.Close()
	do := func(args ...any) string {
		t.Helper()
		v, err := rdb.Do(ctx, args...).Result()
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(v)
	}
	// Keys left of "m" are led by the node, the others elsewhere.
	for _, k := range []string{"a", "z"} {
		for _, s := range []struct {
			cmd  []any
			want string
		}{
			{[]any{"SET", k, "v", "EX", "100"}, "OK"},
			{[]any{"TTL", k}, "100"},
			{[]any{"SET", k, "w", "KEEPTTL"}, "OK"},
			{[]any{"TTL", k}, "100"},
			{[]any{"SET", k, "x", "XX", "GET", "PX", "50000"}, "w"},
			{[]any{"TTL", k}, "50"},
			{[]any{"PERSIST", k}, "1"},
			{[]any{"TTL", k}, "-1"},
			{[]any{"EXPIRE", k, "10"}, "1"},
			{[]any{"EXPIRE", k + "-missing", "10"}, "0"},
			{[]any{"TTL", k + "-missing"}, "-2"},
			{[]any{"SET", k + "n", "1", "NX", "EX", "10"}, "OK"},
			{[]any{"INCR", k + "n"}, "2"},
			{[]any{"TTL", k + "n"}, "10"},
			{[]any{"SET", k + "p", "1"}, "OK"},
			{[]any{"EXPIRE", k + "p", "0"}, "1"},
			{[]any{"EXISTS", k + "p"}, "0"},
			{[]any{"SET", k, "v", "EX", "0"}, "ERR invalid expire time in 'set' command"},
			{[]any{"SET", k + "q", "v", "PXAT", "1"}, "OK"}, // long past
			{[]any{"EXISTS", k + "q"}, "0"},
			{[]any{"SET", k + "q", "v", "EXAT", "4000000000"}, "OK"},
			{[]any{"EXPIREAT", k + "q", "1"}, "1"},
			{[]any{"EXISTS", k + "q"}, "0"},
		} {
			if got := do(s.cmd...); got != s.want {
				t.Fatalf("%v = %q, want %q", s.cmd, got, s.want)
			}
		}
	}
	// The Go client: a TTL on a put, Expire, TTL.
	if err := c.PutTTL(ctx, []byte("zc"), []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if d, err := c.TTL(ctx, []byte("zc")); err != nil || d > time.Minute || d < 50*time.Second {
		t.Fatalf("TTL(zc) = %v, %v", d, err)
	}
	if ok, err := c.Expire(ctx, []byte("zc"), client.Expiry{}); err != nil || !ok {
		t.Fatalf("Expire(zc, none) = %v, %v", ok, err)
	}
	if d, err := c.TTL(ctx, []byte("zc")); err != nil || d != 0 {
		t.Fatalf("TTL(zc) after removing it = %v, %v", d, err)
	}
	if _, err := c.TTL(ctx, []byte("zz")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("TTL of a missing key: %v", err)
	}

	clock.Set(11 * time.Second)
	eventually(t, 10*time.Second, "keys with a TTL of 10 s expire", func() error {
		for _, k := range []string{"a", "an", "z", "zn"} {
			if got := do("GET", k); got != "redis: nil" {
				return fmt.Errorf("GET %s = %q", k, got)
			}
		}
		return nil
	})
	keys, _, err := rdb.Scan(ctx, 0, "", 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if want := []string{"zc"}; !slices.Equal(keys, want) {
		t.Fatalf("SCAN after expiry = %q, want %q", keys, want)
	}
}
