package resp

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestZStoreSeesOneMoment: writers move score from one sorted set to the
// other in MULTI/EXEC, so the two sets' sum is 0 for every member at
// every moment; ZUNIONSTORE and ZUNION, each one transaction, must only
// ever see that, also when their transaction is retried.
func TestZStoreSeesOneMoment(t *testing.T) {
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				m := "m" + strconv.Itoa((w+i)%5)
				must(rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.ZIncrBy(ctx, "za", 1, m)
					p.ZIncrBy(ctx, "zb", -1, m)
					return nil
				}))
			}
		}()
	}
	for i := range 40 {
		if i%10 == 0 {
			kv.mu.Lock()
			kv.conflicts = 2
			kv.mu.Unlock()
		}
		n := must(rc.ZUnionStore(ctx, "dst", &redis.ZStore{Keys: []string{"za", "zb"}}).Result())
		all := must(rc.ZRangeWithScores(ctx, "dst", 0, -1).Result())
		eq(t, int64(len(all)), n)
		eq(t, must(rc.ZCard(ctx, "dst").Result()), n)
		for _, z := range all {
			if z.Score != 0 {
				t.Fatalf("ZUNIONSTORE saw a half-done move: %v", all)
			}
		}
		for _, z := range must(rc.ZUnionWithScores(ctx, redis.ZStore{Keys: []string{"za", "zb"}}).Result()) {
			if z.Score != 0 {
				t.Fatalf("ZUNION saw a half-done move: %v", z)
			}
		}
	}
	wg.Wait()
}
