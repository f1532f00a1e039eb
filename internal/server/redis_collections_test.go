package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
