package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/client"
)

// TestNodeListAndSetChangesAreAtomic: clients pushing, popping and adding
// to the same list and set at once lose and repeat nothing: every pushed
// element is popped exactly once, and the set counts every member added.
// A change that read and wrote the metadata in two steps would lose pushes
// (two clients taking the same tail index) or pop an element twice.
func TestNodeListAndSetChangesAreAtomic(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: startRedisNode(t).RedisAddr(), PoolSize: 8, MaxRetries: -1})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const clients, each = 6, 30
	run := func(f func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- f(i)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	run(func(i int) error {
		for j := range each {
			v := fmt.Sprintf("%d-%d", i, j)
			push := rc.RPush
			if j%2 == 0 {
				push = rc.LPush
			}
			if err := push(ctx, "q", v).Err(); err != nil {
				return err
			}
			if err := rc.SAdd(ctx, "members", v, "shared").Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if n, err := rc.SCard(ctx, "members").Result(); err != nil || n != clients*each+1 {
		t.Fatalf("SCARD = %d, %v; want %d", n, err, clients*each+1)
	}
	var mu sync.Mutex
	popped := map[string]int{}
	run(func(int) error {
		for {
			v, err := rc.LPop(ctx, "q").Result()
			if err == redis.Nil {
				return nil
			}
			if err != nil {
				return err
			}
			mu.Lock()
			popped[v]++
			mu.Unlock()
		}
	})
	for i := range clients {
		for j := range each {
			if v := fmt.Sprintf("%d-%d", i, j); popped[v] != 1 {
				t.Errorf("%s popped %d times", v, popped[v])
			}
		}
	}
	if len(popped) != clients*each {
		t.Errorf("popped %d distinct elements, want %d", len(popped), clients*each)
	}
	if n, err := rc.Exists(ctx, "q").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS q = %d, %v after popping everything; want 0", n, err)
	}
}

// TestRedisDelClearsLeftoversWhileAbsent: DEL's clearing of a hash's or
// set's keys, guarded on the key's absence (internal/resp clearFields),
// goes through the store: one guarded write a batch where the key and its
// span share a range (set t, hash h), one transaction a batch where they
// do not (set s, split at its span). Each collection has more keys than
// one write takes; none is left, and the key made again reads whole.
func TestRedisDelClearsLeftoversWhileAbsent(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	c := tc.client()
	tc.waitReplicated(c, 3)
	splitLedApart(t, tc, c, "s\x00\x01")
	rc := redis.NewClient(&redis.Options{Addr: tc.nodes[0].RedisAddr(), MaxRetries: -1, ReadTimeout: 30 * time.Second})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const n = 1200 // a set's keys: 2,400 (members and positions); the hash's 1,200
	for _, k := range []string{"s", "t", "h"} {
		args := []any{"SADD", k}
		if k == "h" {
			args[0] = "HSET"
		}
		for i := range n {
			args = append(args, fmt.Sprintf("m%05d", i))
			if k == "h" {
				args = append(args, i)
			}
		}
		if err := rc.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s: %v", args[0], err)
		}
		if got, err := rc.Del(ctx, k).Result(); err != nil || got != 1 {
			t.Fatalf("DEL %s = %d, %v", k, got, err)
		}
		// Read in a transaction: it waits out the intents of a clearing
		// transaction just committed.
		var left int
		err := c.Txn(ctx, func(tx *client.Tx) error {
			kvs, err := tx.Scan(ctx, []byte(k), []byte(k+"\x00\x02"), 10)
			left = len(kvs)
			return err
		})
		if err != nil || left != 0 {
			t.Fatalf("after DEL %s: %d keys left in its span, %v", k, left, err)
		}
		if err := rc.SAdd(ctx, k, "a", "b").Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := rc.SMembers(ctx, k).Result(); err != nil || len(got) != 2 || rc.SCard(ctx, k).Val() != 2 {
			t.Fatalf("%s made again: SMEMBERS %v, %v; SCARD %d", k, got, err, rc.SCard(ctx, k).Val())
		}
	}
}
