package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNodeGoRedis: go-redis v9 with its default options (RESP3, asked
// with HELLO 3) connects to a node and runs what an application
// starts with: FLUSHALL, a pipeline, WATCH/MULTI/EXEC with a conflict,
// a SCAN iteration, KEYS, and concurrent HINCRBYs of a new hash, which
// all count.
func TestNodeGoRedis(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: startRedisNode(t).RedisAddr()})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}

	cmds, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 50 {
			p.Set(ctx, fmt.Sprintf("key:%02d", i), i, 0)
		}
		p.Incr(ctx, "counter")
		p.HSet(ctx, "h", "a", 1, "b", 2)
		p.Get(ctx, "key:07")
		return nil
	})
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if got := cmds[len(cmds)-1].(*redis.StringCmd).Val(); got != "7" {
		t.Fatalf("pipelined GET key:07 = %q, want 7", got)
	}

	// WATCH/MULTI/EXEC: a write by another connection between WATCH and
	// EXEC aborts the transaction (TxFailedErr); the retry commits.
	attempts := 0
	incr := func(tx *redis.Tx) error {
		attempts++
		n, err := tx.Get(ctx, "counter").Int()
		if err != nil {
			return err
		}
		if attempts == 1 {
			if err := rc.Set(ctx, "counter", 100, 0).Err(); err != nil {
				return err
			}
			n = 1
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "counter", n+1, 0)
			return nil
		})
		return err
	}
	if err := rc.Watch(ctx, incr, "counter"); !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("WATCH with a conflicting write: %v, want TxFailedErr", err)
	}
	if err := rc.Watch(ctx, incr, "counter"); err != nil {
		t.Fatalf("WATCH retried: %v", err)
	}
	if n, err := rc.Get(ctx, "counter").Int(); err != nil || n != 101 {
		t.Fatalf("counter = %d, %v; want 101", n, err)
	}

	var scanned []string
	it := rc.Scan(ctx, 0, "key:*", 7).Iterator()
	for it.Next(ctx) {
		scanned = append(scanned, it.Val())
	}
	if err := it.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	keys, err := rc.Keys(ctx, "key:*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	slices.Sort(scanned)
	slices.Sort(keys)
	if len(scanned) != 50 || !slices.Equal(scanned, keys) {
		t.Fatalf("SCAN found %d keys, KEYS %d; want the 50 of the pipeline", len(scanned), len(keys))
	}

	const clients, each = 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := rc.HIncrBy(ctx, "fresh", "n", 1).Err(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("HINCRBY: %v", err)
	}
	if n, err := rc.HGet(ctx, "fresh", "n").Int(); err != nil || n != clients*each {
		t.Fatalf("HGET fresh n = %d, %v; want %d", n, err, clients*each)
	}

	if err := rc.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("FLUSHDB: %v", err)
	}
	if n, err := rc.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after FLUSHDB = %d, %v", n, err)
	}
}

// On an insecure node the Redis password's user may FLUSHALL (as Redis's
// default user may; test harnesses start with it); FLUSHDB and FLUSHALL
// need the admin role otherwise (resp's TestFlushNeedsAdmin).
func TestRedisPasswordUserFlushesWhenInsecure(t *testing.T) {
	cfg := testConfig(t)
	cfg.Redis.ListenAddr = "127.0.0.1:0"
	cfg.Security.RedisPassword = "dpw"
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	rc := redis.NewClient(&redis.Options{Addr: s.RedisAddr(), Password: "dpw"})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL as the Redis password's user: %v", err)
	}
}

// FLUSHALL empties a database whose keys lie on two ranges led by
// different nodes, hash fields included.
func TestRedisFlushAcrossRanges(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	c := tc.client()
	tc.waitReplicated(c, 3)
	lh := splitLedApart(t, tc, c, "m")
	var addr string
	for _, n := range tc.nodes {
		if n.NodeID() == lh {
			addr = n.RedisAddr()
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 30 {
		for _, p := range []string{"a", "z"} {
			if err := rc.Set(ctx, fmt.Sprintf("%s%02d", p, i), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rc.HSet(ctx, "zh", "f", 1, "g", 2).Err(); err != nil {
		t.Fatal(err)
	}
	if kvs, err := c.Scan(ctx, []byte("zh"), []byte("zi"), 0); err != nil || len(kvs) != 3 {
		t.Fatalf("the hash's stored keys before FLUSHALL: %d, %v; want its marker and 2 fields", len(kvs), err)
	}
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
	if n, err := rc.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after FLUSHALL = %d, %v", n, err)
	}
	if kvs, err := c.Scan(ctx, []byte("zh"), []byte("zi"), 0); err != nil || len(kvs) != 0 {
		t.Fatalf("stored keys of the hash left after FLUSHALL: %d, %v", len(kvs), err)
	}
}
