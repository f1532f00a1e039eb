package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/client"
)

// redisCalls reads tidekv_redis_kv_calls_total{path} from s's registry.
func redisCalls(t *testing.T, s *Server, path string) float64 {
	t.Helper()
	return gathered(t, s, "tidekv_redis_kv_calls_total", "path", path)
}

// splitLedApart splits the key space at key and moves the leases so that
// one node leads the left range and another the right one; it returns the
// left range's leaseholder.
func splitLedApart(t *testing.T, tc *testCluster, c *client.Client, key string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	split, err := c.Split(ctx, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	left, right := split.GetLeft().GetRangeId(), split.GetRight().GetRangeId()
	lh := tc.leaseholder(t, left)
	if tc.leaseholder(t, right) == lh {
		other := tc.nodes[0].NodeID()
		if other == lh {
			other = tc.nodes[1].NodeID()
		}
		if err := c.TransferLease(ctx, right, other); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the right range's lease moves", func() error {
			if tc.leaseholder(t, right) == lh {
				return fmt.Errorf("node %d still leads range %d", lh, right)
			}
			return nil
		})
	}
	return lh
}

// TestRedisServesLedRangesInProcess: a node's Redis listener serves the
// keys of ranges it leads without any call through its routing client (so
// no gRPC request to itself), and routes the keys of ranges led elsewhere;
// a command over both gets both.
func TestRedisServesLedRangesInProcess(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lh := splitLedApart(t, tc, c, "m")
	node := tc.server(lh)
	rdb := redis.NewClient(&redis.Options{Addr: node.RedisAddr()})
	defer rdb.Close()

	// A field a lost marker left behind (as after a crash between DEL's
	// steps); the next HSET creating the hash must drop it.
	if err := c.Put(ctx, []byte("g\x00\x01old"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Every key here lies left of "m", in the range the node leads.
	steps := []struct {
		cmd  []any
		want string
	}{
		{[]any{"SET", "a", "1"}, "OK"},
		{[]any{"GET", "a"}, "1"},
		{[]any{"INCR", "cnt"}, "1"},
		{[]any{"HSET", "h", "f1", "v1", "f2", "v2"}, "2"},
		{[]any{"HSET", "h", "f2", "w2", "f3", "v3"}, "1"},
		{[]any{"HGET", "h", "f2"}, "w2"},
		{[]any{"HGETALL", "h"}, "map[f1:v1 f2:w2 f3:v3]"}, // a RESP3 map
		{[]any{"HDEL", "h", "f1"}, "1"},
		{[]any{"HSET", "g", "new", "1"}, "1"},
		{[]any{"HGETALL", "g"}, "map[new:1]"},
		{[]any{"HSET", "a", "f", "v"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]any{"MSET", "b", "2", "c", "3"}, "OK"},
		{[]any{"MGET", "a", "b", "c", "d"}, "[1 2 3 <nil>]"},
		{[]any{"DEL", "c"}, "1"},
		{[]any{"TYPE", "h"}, "hash"},
		{[]any{"GET", "h"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
	}
	run := func(cmd []any, want string) {
		t.Helper()
		v, err := rdb.Do(ctx, cmd...).Result()
		got := fmt.Sprint(v)
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Fatalf("%v = %q, want %q", cmd, got, want)
		}
	}
	for _, s := range steps {
		run(s.cmd, s.want)
	}
	if n := redisCalls(t, node, "routed"); n != 0 {
		t.Fatalf("%v calls on keys of a range the node leads went through its routing client", n)
	}
	if n := redisCalls(t, node, "local"); n < float64(len(steps)) {
		t.Fatalf("only %v calls were served in process for %d commands", n, len(steps))
	}

	// "z" lies in the range led elsewhere.
	run([]any{"SET", "z", "26"}, "OK")
	run([]any{"MGET", "a", "z", "b"}, "[1 26 2]")
	run([]any{"HSET", "zh", "f", "1", "g", "2"}, "2")
	run([]any{"HSET", "zh", "g", "3"}, "0")
	run([]any{"HGETALL", "zh"}, "map[f:1 g:3]")
	run([]any{"HSET", "z", "f", "v"}, "WRONGTYPE Operation against a key holding the wrong kind of value")
	keys, _, err := rdb.Scan(ctx, 0, "", 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if want := []string{"a", "b", "cnt", "g", "h", "z", "zh"}; !slices.Equal(keys, want) {
		t.Fatalf("SCAN over both ranges = %q, want %q", keys, want)
	}
	if n := redisCalls(t, node, "routed"); n < 7 {
		t.Fatalf("%v routed calls for seven commands on ranges led elsewhere", n)
	}
}
