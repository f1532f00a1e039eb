package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/raftstore"
)

// TestRedisCommandsPastMaxBatchKeys: on a 3-node cluster split at "m",
// its two ranges led by different nodes, commands writing several times
// MaxBatchKeys (1,000) keys are served as Redis serves them, each as one
// transaction whose writes reach the coordinator and the ranges in pieces:
// MSET and DEL of 5,000 keys across both ranges, LPUSH of 8,000
// elements, SADD, ZADD and HSET of 3,000 members and SUNIONSTORE of a
// 3,000-member result. A reader meanwhile never sees part of one: EXEC of
// EXISTS of a key on each side (one snapshot) counts 0 or 2, LRANGE of
// the whole list is empty or whole. Past the transaction's limit of
// 10,000 keys a command is refused in one sentence and writes nothing.
func TestRedisCommandsPastMaxBatchKeys(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	c := tc.client()
	tc.waitReplicated(c, 3)
	tc.waitLogVersion(t, raftstore.LatestLogVersion)
	node := tc.server(splitLedApart(t, tc, c, "m"))
	rdb := redis.NewClient(&redis.Options{Addr: node.RedisAddr(), MaxRetries: -1, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	const n = 5000
	key := func(i int) string { // half below "m", half above
		if i%2 == 0 {
			return fmt.Sprintf("a%05d", i)
		}
		return fmt.Sprintf("z%05d", i)
	}
	var mset, del []any
	for i := range n {
		mset, del = append(mset, key(i), "v"), append(del, key(i))
	}
	// watch runs read until stop, failing the test on a reading it says
	// is part of a command.
	watch := func(what string, read func() (int64, error), whole int64) (stop func()) {
		done, quit := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for reads := 0; reads < 100_000; reads++ {
				select {
				case <-quit:
					return
				default:
				}
				got, err := read()
				if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "retry") {
					t.Errorf("%s: %v", what, err)
					return
				}
				if err == nil && got != 0 && got != whole {
					t.Errorf("%s = %d: part of a command (want 0 or %d)", what, got, whole)
					return
				}
			}
		}()
		return func() { close(quit); <-done }
	}
	reader := redis.NewClient(&redis.Options{Addr: node.RedisAddr(), MaxRetries: -1})
	defer reader.Close()
	bothSides := func() (int64, error) {
		var first, last *redis.IntCmd
		_, err := reader.TxPipelined(ctx, func(p redis.Pipeliner) error {
			first, last = p.Exists(ctx, key(0)), p.Exists(ctx, key(n-1))
			return nil
		})
		if err != nil {
			return 0, err
		}
		return first.Val() + last.Val(), nil
	}
	stop := watch("EXEC of EXISTS of both sides during MSET", bothSides, 2)
	began := time.Now()
	if err := rdb.Do(ctx, append([]any{"MSET"}, mset...)...).Err(); err != nil {
		t.Fatalf("MSET of %d keys: %v", n, err)
	}
	t.Logf("MSET of %d keys: %v", n, time.Since(began))
	stop()
	if got, err := rdb.Do(ctx, append([]any{"EXISTS"}, del...)...).Int64(); err != nil || got != n {
		t.Fatalf("EXISTS of the MSET's keys = %d, %v; want %d", got, err, n)
	}
	stop = watch("EXEC of EXISTS of both sides during DEL", bothSides, 2)
	began = time.Now()
	if got, err := rdb.Do(ctx, append([]any{"DEL"}, del...)...).Int64(); err != nil || got != n {
		t.Fatalf("DEL of %d keys = %d, %v; want %d", n, got, err, n)
	}
	t.Logf("DEL of %d keys: %v", n, time.Since(began))
	stop()
	if got, err := rdb.Do(ctx, append([]any{"EXISTS"}, del...)...).Int64(); err != nil || got != 0 {
		t.Fatalf("EXISTS of the deleted keys = %d, %v; want 0", got, err)
	}

	members := func(count int, word func(i int) []any, prefix ...any) []any {
		for i := range count {
			prefix = append(prefix, word(i)...)
		}
		return prefix
	}
	member := func(i int) []any { return []any{fmt.Sprintf("m%05d", i)} }
	stop = watch("LRANGE of the whole list during LPUSH", func() (int64, error) {
		got, err := reader.LRange(ctx, "list", 0, -1).Result()
		return int64(len(got)), err
	}, 8000)
	began = time.Now()
	if got, err := rdb.Do(ctx, members(8000, member, "LPUSH", "list")...).Int64(); err != nil || got != 8000 {
		t.Fatalf("LPUSH of 8000 elements = %d, %v", got, err)
	}
	t.Logf("LPUSH of 8000 elements: %v", time.Since(began))
	stop()
	for _, c := range []struct {
		write []any
		count []any
		want  int64
	}{
		{members(3000, member, "SADD", "set"), []any{"SCARD", "set"}, 3000},
		{members(3000, func(i int) []any { return []any{i, member(i)[0]} }, "ZADD", "zset"), []any{"ZCARD", "zset"}, 3000},
		{members(3000, func(i int) []any { return []any{member(i)[0], "v"} }, "HSET", "hash"), []any{"HLEN", "hash"}, 3000},
		{[]any{"SUNIONSTORE", "union", "set", "nokey"}, []any{"SCARD", "union"}, 3000},
	} {
		began = time.Now()
		if got, err := rdb.Do(ctx, c.write...).Int64(); err != nil || got != c.want {
			t.Fatalf("%s of %d arguments = %d, %v; want %d", c.write[0], len(c.write)-1, got, err, c.want)
		}
		t.Logf("%s of %d arguments: %v", c.write[0], len(c.write)-1, time.Since(began))
		if got, err := rdb.Do(ctx, c.count...).Int64(); err != nil || got != c.want {
			t.Fatalf("%s = %d, %v; want %d", c.count[0], got, err, c.want)
		}
	}

	err := rdb.Do(ctx, members(10_000, member, "RPUSH", "toolong")...).Err()
	t.Logf("RPUSH of 10,000 elements: %v", err)
	if err == nil || !strings.Contains(err.Error(), "over its limits of 10000 keys") {
		t.Fatalf("RPUSH of 10,000 elements (10,001 keys) = %v; want the transaction's limit", err)
	}
	if got, err := rdb.Exists(ctx, "toolong").Result(); err != nil || got != 0 {
		t.Fatalf("EXISTS of the refused list = %d, %v; want 0", got, err)
	}
}
