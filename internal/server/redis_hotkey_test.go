package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// opRequests sums tidekv_requests_total{op} over every code and node: the
// KV commands of that kind the cluster served.
func (tc *testCluster) opRequests(t *testing.T, op string) float64 {
	t.Helper()
	var sum float64
	for _, s := range tc.nodes {
		mfs, err := s.metrics.Reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "tidekv_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" && l.GetValue() == op {
						sum += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return sum
}

// TestRedisConcurrentIncrOneKey: 50 connections INCR one key at once
// (redis-benchmark -t incr, issue 37). Each INCR is one replicated
// increment on the key's leaseholder: no compare-and-set round that loses
// to another connection and is proposed again, so the cluster serves
// exactly one increment command per INCR and no compare-and-set. Every
// reply is a distinct value and the last is the count: none was lost or
// applied twice.
func TestRedisConcurrentIncrOneKey(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	c := tc.client()
	tc.waitReplicated(c, 3)
	tc.waitLogVersion(t, raftstore.LatestLogVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: tc.nodes[0].RedisAddr(), PoolSize: 50})
	defer rdb.Close()
	// One write first, so that the range's lease and routing are settled
	// before the counters are read.
	if err := rdb.Set(ctx, "counter", "0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	const conns, each = 50, 20
	cas0, incr0 := tc.opRequests(t, "cas"), tc.opRequests(t, "incr")
	concurrentDistinct(t, conns, each, "INCR", func(int, int) (int64, error) { return rdb.Incr(ctx, "counter").Result() })
	if got, err := rdb.Get(ctx, "counter").Int64(); err != nil || got != conns*each {
		t.Fatalf("counter %d (%v), want %d", got, err, conns*each)
	}
	cas, incr := tc.opRequests(t, "cas")-cas0, tc.opRequests(t, "incr")-incr0
	t.Logf("%d INCRs: %.0f compare-and-set commands, %.0f increment commands", conns*each, cas, incr)
	if cas != 0 || incr != conns*each {
		t.Fatalf("%d INCRs took %.0f compare-and-set and %.0f increment commands, want 0 and %d (one increment each, no retries)", conns*each, cas, incr, conns*each)
	}
}

// TestRedisIncrBeforeEveryNodeIncrements: while one node's binary
// applies only log version 11, which would take an increment for a
// compare-and-set, INCR sends no increment to any node and still counts
// right, by compare-and-set rounds.
func TestRedisIncrBeforeEveryNodeIncrements(t *testing.T) {
	i := 0
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Redis.ListenAddr = "127.0.0.1:0"
		// The first node, so that the others cannot raise the version
		// before it joins.
		if i++; i == 1 {
			c.Raft.MaxLogVersion = raftstore.LogVersionIncrement - 1
		}
	})
	tc.waitReplicated(tc.client(), 3)
	tc.waitLogVersion(t, raftstore.LogVersionIncrement-1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range tc.nodes {
		rdb := redis.NewClient(&redis.Options{Addr: s.RedisAddr()})
		for range 5 {
			if err := rdb.Incr(ctx, "counter").Err(); err != nil {
				t.Fatal(err)
			}
		}
		rdb.Close()
	}
	rdb := redis.NewClient(&redis.Options{Addr: tc.nodes[2].RedisAddr()})
	defer rdb.Close()
	if got, err := rdb.IncrBy(ctx, "counter", -15).Result(); err != nil || got != 0 {
		t.Fatalf("INCRBY counter -15 = %d, %v; want 0", got, err)
	}
	// The Go client's Increment refuses too, sending nothing: a binary at
	// version 11 would take it for a compare-and-set writing "".
	if _, _, _, err := tc.client().Increment(ctx, []byte("counter"), 1, client.Expiry{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("client Increment at log version %d: %v, want errors.ErrUnsupported", raftstore.LogVersionIncrement-1, err)
	}
	if n := tc.opRequests(t, "incr"); n != 0 {
		t.Fatalf("%.0f increment commands sent before every node applies them", n)
	}
}

// TestRedisConcurrentPushesOneList: 50 connections LPUSH, SADD and ZADD
// one key each at once (redis-benchmark -t lpush,sadd,zadd, issue 37).
// Each command is a transaction on the collection's metadata key; the
// gateway runs the commands waiting on one key in one transaction, each
// on its own savepoint, instead of side by side, where all but one would
// conflict and back off. Every command succeeds, each LPUSH and SADD
// replies a distinct length or count of new members, and the collections
// hold every element; fewer transactions commit than commands ran.
func TestRedisConcurrentPushesOneList(t *testing.T) {
	tc, rdb, ctx := startHotKeyCluster(t)
	const conns, each = 50, 10
	commits0 := tc.txnCommits(t)
	concurrentDistinct(t, conns, each, "LPUSH", func(i, j int) (int64, error) {
		m := fmt.Sprintf("m%d-%d", i, j)
		n, err := rdb.LPush(ctx, "list", m).Result()
		if err == nil {
			err = rdb.SAdd(ctx, "set", m).Err()
		}
		if err == nil {
			err = rdb.ZAdd(ctx, "zset", redis.Z{Score: float64(i*each + j), Member: m}).Err()
		}
		return n, err
	})
	const want = conns * each
	if n, err := rdb.LLen(ctx, "list").Result(); err != nil || n != want {
		t.Fatalf("LLEN list = %d, %v; want %d", n, err, want)
	}
	if n, err := rdb.SCard(ctx, "set").Result(); err != nil || n != want {
		t.Fatalf("SCARD set = %d, %v; want %d", n, err, want)
	}
	if n, err := rdb.ZCard(ctx, "zset").Result(); err != nil || n != want {
		t.Fatalf("ZCARD zset = %d, %v; want %d", n, err, want)
	}
	commits := tc.txnCommits(t) - commits0
	t.Logf("%d LPUSH, SADD and ZADD commands: %.0f transactions committed", 3*want, commits)
	if commits >= 3*want {
		t.Fatalf("%.0f transactions committed for %d commands: none ran together", commits, 3*want)
	}
}

// startHotKeyCluster starts a 3-node cluster with its Redis listeners, at
// the log version collections need, and a client of node 1's with 50
// connections that does not retry (a retry would hide an error); ctx
// bounds the test's commands to 60 s.
func startHotKeyCluster(t *testing.T) (*testCluster, *redis.Client, context.Context) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	tc.waitReplicated(tc.client(), 3)
	tc.waitLogVersion(t, raftstore.LatestLogVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	rdb := redis.NewClient(&redis.Options{Addr: tc.nodes[0].RedisAddr(), PoolSize: 50, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return tc, rdb, ctx
}

// txnCommits sums tidekv_txn_commits_total over every path and node.
func (tc *testCluster) txnCommits(t *testing.T) float64 {
	t.Helper()
	var sum float64
	for _, s := range tc.nodes {
		mfs, err := s.metrics.Reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "tidekv_txn_commits_total" {
				for _, m := range mf.GetMetric() {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// concurrentDistinct runs op each times on each of conns goroutines at
// once (op(i, j): goroutine i's j-th) and fails on an error or on a reply
// two ops got: each of name's replies, a count or a length, is its own.
func concurrentDistinct(t *testing.T, conns, each int, name string, op func(i, j int) (int64, error)) {
	t.Helper()
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Go(func() {
			for j := range each {
				v, err := op(i, j)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				dup := seen[v]
				seen[v] = true
				mu.Unlock()
				if dup {
					errs <- fmt.Errorf("%s answered %d twice", name, v)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestRedisConcurrentPopsOneKey: 50 connections pop one set, one sorted
// set and one list at once (SPOP, ZPOPMIN and LPOP of one key, as
// redis-benchmark's default mix runs them, issue 37) until each is empty. Every pop succeeds (none
// times out in a storm of conflicting transactions), every member is
// returned to exactly one connection, and the pops past the last member
// answer nil.
func TestRedisConcurrentPopsOneKey(t *testing.T) {
	tc, rdb, ctx := startHotKeyCluster(t)
	const conns, each, members = 50, 12, 500 // 600 pops of 500 members
	for i := 0; i < members; i += 100 {
		var ms []any
		for j := i; j < i+100; j++ {
			ms = append(ms, fmt.Sprintf("m%d", j))
		}
		var zs []redis.Z
		for _, m := range ms {
			zs = append(zs, redis.Z{Score: float64(len(zs) + i), Member: m})
		}
		if err := rdb.SAdd(ctx, "set", ms...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, "zset", zs...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.RPush(ctx, "list", ms...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pops := map[string]func() (string, error){
		"SPOP": func() (string, error) { return rdb.SPop(ctx, "set").Result() },
		"ZPOPMIN": func() (string, error) {
			zs, err := rdb.ZPopMin(ctx, "zset").Result()
			if err != nil || len(zs) == 0 {
				return "", redis.Nil
			}
			return zs[0].Member.(string), nil
		},
		"LPOP": func() (string, error) { return rdb.LPop(ctx, "list").Result() },
	}
	for name, pop := range pops {
		var mu sync.Mutex
		got := map[string]int{}
		nils := 0
		start, commits0 := time.Now(), tc.txnCommits(t)
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		for range conns {
			wg.Go(func() {
				for range each {
					m, err := pop()
					if err != nil && !errors.Is(err, redis.Nil) {
						errs <- fmt.Errorf("%s: %w", name, err)
						return
					}
					mu.Lock()
					if err != nil {
						nils++
					} else {
						got[m]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d %ss in %v: %.0f transactions committed", conns*each, name, time.Since(start).Round(time.Millisecond), tc.txnCommits(t)-commits0)
		for m, n := range got {
			if n != 1 {
				t.Fatalf("%s returned %s %d times", name, m, n)
			}
		}
		if len(got) != members || nils != conns*each-members {
			t.Fatalf("%s: %d distinct members and %d nils, want %d and %d", name, len(got), nils, members, conns*each-members)
		}
	}
}
