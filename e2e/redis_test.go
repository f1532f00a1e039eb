package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/testcluster"
)

// TestRedisProtocol talks to the real binary's Redis port with an unmodified
// Redis client and checks that writes made there are the store's own data.
func TestRedisProtocol(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Node 3's port: it usually holds no lease, so commands are routed.
	opts := redisOptions(t, tc.RedisAddr(3))
	opts.MaxRetries = 5
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if v, err := rdb.Get(ctx, "greeting").Result(); err != nil || v != "hello" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	if err := rdb.Get(ctx, "missing").Err(); err != redis.Nil {
		t.Fatalf("GET missing: %v, want redis.Nil", err)
	}
	for i := 0; i < 10; i++ {
		if err := rdb.Incr(ctx, "counter").Err(); err != nil {
			t.Fatalf("INCR: %v", err)
		}
	}
	if err := rdb.HSet(ctx, "user:1", "name", "ada", "lang", "go").Err(); err != nil {
		t.Fatalf("HSET: %v", err)
	}
	if m, err := rdb.HGetAll(ctx, "user:1").Result(); err != nil || m["name"] != "ada" || m["lang"] != "go" || len(m) != 2 {
		t.Fatalf("HGETALL = %v, %v", m, err)
	}
	if err := rdb.Get(ctx, "user:1").Err(); err == nil {
		t.Fatal("GET of a hash must fail with WRONGTYPE")
	}
	// The same data through the native client, from another node.
	c := newClient(t, []string{tc.Addr(1)})
	for k, want := range map[string]string{"greeting": "hello", "counter": "10"} {
		if v, err := c.Get(ctx, []byte(k)); err != nil || string(v) != want {
			t.Fatalf("native Get(%s) = %q, %v; want %q", k, v, err, want)
		}
	}
}
