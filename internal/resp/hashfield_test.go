package resp

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// HINCRBY is atomic on its field, also while the hash is being created:
// concurrent increments of a new hash from several connections all count,
// and fields a former hash left behind (SET over it) do not come back.
func TestHIncrByConcurrent(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), nil, nil)
	eq(t, must(rc.HSet(ctx, "h", "stale", "x").Result()), int64(1))
	eq(t, must(rc.Set(ctx, "h", "string", 0).Result()), "OK")
	// SET over the hash left its field behind; GETDEL removes the string
	// alone, so "stale" stays with no marker.
	if _, err := rc.Do(ctx, "GETDEL", "h").Result(); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := rc.HIncrBy(ctx, "h", "n", 1).Err(); err != nil {
					panic(fmt.Sprintf("HINCRBY: %v", err))
				}
			}
		}()
	}
	wg.Wait()
	eq(t, must(rc.HGet(ctx, "h", "n").Result()), fmt.Sprint(workers*each))
	eq(t, must(rc.HLen(ctx, "h").Result()), int64(1))
}
