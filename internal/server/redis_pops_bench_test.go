package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/raftstore"
)

// BenchmarkRedisPops pops one large set and one large sorted set of a
// three-node cluster from 50 connections, as redis-benchmark's default mix
// does (issue 37): SPOP and ZPOPMIN of a set of 10,000 and 100,000
// members, b.N pops each (run with -benchtime=2000x: a pop's cost must
// not grow with the pops before it), reported as pops/s. zadd-after-del
// deletes a sorted set of 10,000 members and sends 1,000 ZADDs to its key
// from 50 connections, the first of which makes the set anew: the slowest
// ZADD is reported (and the DEL).
func BenchmarkRedisPops(b *testing.B) {
	tc := startClusterWith(b, 3, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	tc.waitReplicated(tc.client(), 3)
	tc.waitLogVersion(b, raftstore.LatestLogVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: tc.nodes[0].RedisAddr(), PoolSize: 50, MaxRetries: -1, ReadTimeout: time.Minute})
	defer rdb.Close()
	fill := func(b *testing.B, cmd, key string, n int) {
		b.Helper()
		rdb.Del(ctx, key)
		for i := 0; i < n; i += 1000 {
			args := []any{cmd, key}
			for j := i; j < min(i+1000, n); j++ {
				if cmd == "zadd" {
					args = append(args, j)
				}
				args = append(args, fmt.Sprintf("element:%d", j))
			}
			if err := rdb.Do(ctx, args...).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	pops := func(b *testing.B, cmd, key string) {
		b.Helper()
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		start := time.Now()
		for range 50 {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if err := rdb.Do(ctx, cmd, key).Err(); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pops/s")
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	for _, n := range []int{10_000, 100_000} {
		for _, c := range []struct{ pop, add, key string }{{"spop", "sadd", "s"}, {"zpopmin", "zadd", "z"}} {
			b.Run(fmt.Sprintf("%s/%d", c.pop, n), func(b *testing.B) {
				fill(b, c.add, c.key, n)
				b.ResetTimer()
				pops(b, c.pop, c.key)
			})
		}
	}
	b.Run("zadd-after-del/10000", func(b *testing.B) {
		var del, slowest time.Duration
		for range b.N {
			b.StopTimer()
			fill(b, "zadd", "d", 10_000)
			b.StartTimer()
			start := time.Now()
			if err := rdb.Del(ctx, "d").Err(); err != nil {
				b.Fatal(err)
			}
			del += time.Since(start)
			// 50 connections' ZADDs, as the default mix sends them: the
			// slowest is the one that made the set.
			var mu sync.Mutex
			var wg sync.WaitGroup
			for c := range 50 {
				wg.Go(func() {
					for i := range 20 {
						start := time.Now()
						if err := rdb.ZAdd(ctx, "d", redis.Z{Score: 0, Member: fmt.Sprintf("element:%d:%d", c, i)}).Err(); err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						slowest = max(slowest, time.Since(start))
						mu.Unlock()
					}
				})
			}
			wg.Wait()
		}
		b.ReportMetric(float64(del.Milliseconds())/float64(b.N), "del-ms")
		b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-zadd-ms")
	})
}
