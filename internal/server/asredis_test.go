package server

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/testutil/redisdiff"
)

// startRedisNode starts a one-node cluster with its Redis listener, at
// the log version TTLs and transactions need (a new cluster reaches it
// shortly after it starts).
func startRedisNode(t *testing.T) *Server {
	tc := startClusterWith(t, 1, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	tc.waitLogVersion(t, raftstore.LatestLogVersion)
	return tc.nodes[0]
}

// TestNodeAsRedis is the differential test (internal/testutil/redisdiff):
// the scripts and drawn sequences against redis-server and a one-node
// cluster's Redis listener, which must answer alike.
func TestNodeAsRedis(t *testing.T) {
	redisdiff.Check(t, startRedisNode(t).RedisAddr())
}

// TestNodeReadModifyWriteIsAtomic: clients editing the same keys at once
// lose no update: APPEND and INCRBYFLOAT add up, and SETRANGEs of
// distinct offsets of one string all land (a lost update would leave a
// zero byte where another client's write was).
func TestNodeReadModifyWriteIsAtomic(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: startRedisNode(t).RedisAddr(), PoolSize: 8, MaxRetries: -1})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const clients, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				for _, c := range []*redis.IntCmd{
					rc.Append(ctx, "log", "x"),
					rc.SetRange(ctx, "bytes", int64(i*each+j), "y"),
				} {
					if c.Err() != nil {
						errs <- c.Err()
						return
					}
				}
				if err := rc.IncrByFloat(ctx, "sum", 0.5).Err(); err != nil {
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
	if n, err := rc.StrLen(ctx, "log").Result(); err != nil || n != clients*each {
		t.Fatalf("STRLEN log = %d, %v; want %d", n, err, clients*each)
	}
	if v, err := rc.Get(ctx, "bytes").Result(); err != nil || v != string(bytes.Repeat([]byte("y"), clients*each)) {
		t.Fatalf("GET bytes = %q, %v; want %d y's", v, err, clients*each)
	}
	if v, err := rc.Get(ctx, "sum").Result(); err != nil || v != strconv.Itoa(clients*each/2) {
		t.Fatalf("GET sum = %q, %v; want %d", v, err, clients*each/2)
	}
}
