package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/testutil/redisserver"
)

// redisClients opens a go-redis client to every node's Redis listener.
func redisClients(t testing.TB, tc *testCluster) []*redis.Client {
	var out []*redis.Client
	for _, s := range tc.nodes {
		rc := redis.NewClient(&redis.Options{Addr: s.RedisAddr(), MaxRetries: -1})
		t.Cleanup(func() { rc.Close() })
		out = append(out, rc)
	}
	return out
}

// redisTransfer moves amt between two accounts over Redis: MULTI DECRBY
// INCRBY EXEC, or, with watch, WATCH, two GETs and MULTI SET SET EXEC
// on one connection, again while a watched key changed.
func redisTransfer(ctx context.Context, rc *redis.Client, from, to, amt int, watch bool) error {
	f, g := string(acct(from)), string(acct(to))
	if !watch {
		_, err := rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.DecrBy(ctx, f, int64(amt))
			p.IncrBy(ctx, g, int64(amt))
			return nil
		})
		return err
	}
	conn := rc.Conn()
	defer conn.Close()
	for {
		fv, gv, err := watchAndRead(ctx, conn, f, g)
		if blockedRead(err) {
			// Plain reads (WATCH's, GET) that met a running transaction's
			// intent for longer than IntentWait; EXEC never answers so.
			if err := do(ctx, conn, "UNWATCH"); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		_, err = conn.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, f, fv-amt, 0)
			p.Set(ctx, g, gv+amt, 0)
			return nil
		})
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
}

func watchAndRead(ctx context.Context, conn *redis.Conn, f, g string) (fv, gv int, err error) {
	if err := do(ctx, conn, "WATCH", f, g); err != nil {
		return 0, 0, err
	}
	if fv, err = conn.Get(ctx, f).Int(); err != nil {
		return 0, 0, err
	}
	gv, err = conn.Get(ctx, g).Int()
	return fv, gv, err
}

// do runs a command on conn (a redis.Conn has no Do).
func do(ctx context.Context, conn *redis.Conn, args ...any) error {
	cmd := redis.NewStatusCmd(ctx, args...)
	_ = conn.Process(ctx, cmd)
	return cmd.Err()
}

func blockedRead(err error) bool {
	return err != nil && strings.HasSuffix(err.Error(), ": retry")
}

// Transfers over Redis between accounts on two ranges, through every
// node's listener, half with MULTI alone and half with WATCH: every
// snapshot scan sees the total, and so does the end.
func TestRedisTransfersKeepTheTotal(t *testing.T) {
	tc, c, ctx := startBank(t, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	rcs := redisClients(t, tc)
	const want = bankAccounts * bankStart
	var committed [2]atomic.Int64
	var gaveUp atomic.Int64
	stop := make(chan struct{})
	wg := untilStopped(4, stop, func(w int, rng *rand.Rand) bool {
		from, to := rng.Intn(bankAccounts/2), bankAccounts/2+rng.Intn(bankAccounts/2)
		if rng.Intn(2) == 0 {
			from, to = to, from
		}
		switch err := redisTransfer(ctx, rcs[w%len(rcs)], from, to, 1+rng.Intn(10), w%2 == 1); {
		case err == nil:
			committed[w%2].Add(1)
		case strings.HasPrefix(err.Error(), "ERR transaction gave up after"):
			gaveUp.Add(1) // MaxTxnAttempts conflicts in a row, applying nothing
		default:
			t.Errorf("transfer: %v", err)
			return false
		}
		return true
	})
	const minTransfers = 10 // of each kind
	scans, failed := scanTotals(ctx, c, want, func() bool {
		return committed[0].Load() >= minTransfers && committed[1].Load() >= minTransfers
	})
	// The workers stop before the clients close.
	close(stop)
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	t.Logf("%d MULTI and %d WATCH transfers, %d gave up; %d snapshot scans", committed[0].Load(), committed[1].Load(), gaveUp.Load(), scans)
	if committed[0].Load() < minTransfers || committed[1].Load() < minTransfers {
		t.Fatalf("only %d MULTI and %d WATCH transfers committed", committed[0].Load(), committed[1].Load())
	}
	eventually(t, 10*time.Second, "the total", func() error {
		if total, at, err := bankTotal(ctx, c); err != nil || total != want {
			return fmt.Errorf("total %d at %s, want %d (%v)", total, at, want, err)
		}
		return nil
	})
}

// A write through another node's listener to a watched key, of another
// value or of the same one (a new version), makes EXEC answer the null
// array, and nothing queued is applied, on either range.
func TestRedisWatchAbortsOnAnotherConnectionsWrite(t *testing.T) {
	tc, _, ctx := startBank(t, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	rcs := redisClients(t, tc)
	left, right := string(acct(0)), string(acct(bankAccounts-1))
	for _, v := range []string{"7", "7"} {
		err := rcs[0].Watch(ctx, func(tx *redis.Tx) error {
			if err := rcs[1].Set(ctx, left, v, 0).Err(); err != nil {
				return err
			}
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, left, "1", 0)
				p.Set(ctx, right, "1", 0)
				return nil
			})
			return err
		}, left)
		if !errors.Is(err, redis.TxFailedErr) {
			t.Fatalf("EXEC after a watched key was set to %s: %v, want %v", v, err, redis.TxFailedErr)
		}
		got, err := rcs[2].MGet(ctx, left, right).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := []any{v, strconv.Itoa(bankStart)}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after the aborted EXEC: %v, want %v", got, want)
		}
	}
}

// BenchmarkRedisMultiExec runs MULTI DECRBY INCRBY EXEC transfers from 8
// connections through one node of a 3-node cluster, between accounts of
// one range or of two, and the same against one unreplicated redis-server
// on this machine when it is installed.
//
// It uses 1,000 accounts, acct-0 to acct-999: the bank's split at acct-4
// puts acct-0 to acct-399 in one range and acct-400 to acct-999 in the
// other, so contention is low (the bank tests' 8 accounts measure
// conflicts instead).
func BenchmarkRedisMultiExec(b *testing.B) {
	tc, c, ctx := startBank(b, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	const accounts, firstRange = 1000, 400
	for i := bankAccounts; i < accounts; i++ {
		if err := c.Put(ctx, acct(i), []byte(strconv.Itoa(bankStart))); err != nil {
			b.Fatal(err)
		}
	}
	rc := redisClients(b, tc)[0]
	b.Run("tidekv-one-range", func(b *testing.B) {
		benchRedisTransfers(ctx, b, rc, func(r *rand.Rand) (int, int) { return r.Intn(firstRange), r.Intn(firstRange) })
	})
	b.Run("tidekv-two-ranges", func(b *testing.B) {
		benchRedisTransfers(ctx, b, rc, func(r *rand.Rand) (int, int) { return r.Intn(firstRange), firstRange + r.Intn(accounts-firstRange) })
	})
	addr := redisserver.Start(b)
	if addr == "" {
		b.Log("redis-server is not installed: no comparison")
		return
	}
	plain := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { plain.Close() })
	for i := range accounts {
		if err := plain.Set(ctx, string(acct(i)), bankStart, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("redis-server", func(b *testing.B) {
		benchRedisTransfers(ctx, b, plain, func(r *rand.Rand) (int, int) { return r.Intn(accounts), r.Intn(accounts) })
	})
}

func benchRedisTransfers(ctx context.Context, b *testing.B, rc *redis.Client, pick func(*rand.Rand) (int, int)) {
	var seed atomic.Int64
	b.SetParallelism(4) // 8 connections on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewSource(seed.Add(1)))
		for pb.Next() {
			from, to := pick(rng)
			if err := redisTransfer(ctx, rc, from, to, 1, false); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// SET with a TTL inside MULTI/EXEC, on two ranges: both keys expire.
func TestRedisExecSetsTTL(t *testing.T) {
	tc, _, ctx := startBank(t, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	rc := redisClients(t, tc)[1]
	keys := []string{string(acct(0)) + "t", string(acct(bankAccounts-1)) + "t"}
	if _, err := rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Set(ctx, k, "v", 800*time.Millisecond)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl, err := rc.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > 800*time.Millisecond {
			t.Fatalf("PTTL %s after EXEC: %v, %v", k, ttl, err)
		}
	}
	time.Sleep(time.Second)
	for _, k := range keys {
		if n, err := rc.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Errorf("%s after its TTL: exists %d, %v", k, n, err)
		}
	}
}

// TTLs inside EXEC through a cluster, on keys of two ranges (a
// transaction with intents): INCR and SET KEEPTTL keep the key's TTL,
// EXPIRE sets one and PERSIST removes one, as in Redis (the resp
// package's TestExecTTLsAsRedis compares the replies with redis-server's).
func TestRedisExecKeepsAndSetsTTLs(t *testing.T) {
	tc, _, ctx := startBank(t, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	rc := redisClients(t, tc)[1]
	for _, side := range []string{string(acct(0)), string(acct(bankAccounts - 1))} {
		n, k, q, p := side+"n", side+"k", side+"q", side+"p"
		if err := rc.Set(ctx, n, "5", 100*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{k, p} {
			if err := rc.Set(ctx, key, "v", 100*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := rc.Set(ctx, q, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		cmds, err := rc.TxPipelined(ctx, func(pl redis.Pipeliner) error {
			pl.Incr(ctx, n)
			pl.SetArgs(ctx, k, "w", redis.SetArgs{KeepTTL: true})
			pl.Expire(ctx, q, 50*time.Second)
			pl.Persist(ctx, p)
			pl.TTL(ctx, k)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(cmds); !strings.Contains(got, "incr "+n+": 6") || !strings.Contains(got, "ttl "+k+": 1m40s") {
			t.Fatalf("EXEC's replies: %s", got)
		}
		for key, want := range map[string]time.Duration{n: 100 * time.Second, k: 100 * time.Second, q: 50 * time.Second, p: -1} {
			ttl, err := rc.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			// The TTLs count down from the writes before the
			// transaction; a cleared one is -1 (no TTL).
			if (want < 0 && ttl != -1*time.Nanosecond && ttl != -1) || (want > 0 && (ttl <= want-10*time.Second || ttl > want)) {
				t.Errorf("PTTL %s after EXEC = %v, want about %v", key, ttl, want)
			}
		}
		if v, err := rc.Get(ctx, k).Result(); err != nil || v != "w" {
			t.Errorf("GET %s = %q, %v", k, v, err)
		}
	}
}

// MULTI/EXEC and WATCH in databases other than 0: an ordered key space
// and a hashed one with a default TTL, whose keys lie on several ranges.
// The writes land in the selected key space only, a watched key changed
// there aborts EXEC, and puts inside EXEC get the key space's TTL.
func TestRedisExecInSelectedDatabase(t *testing.T) {
	tc, c, ctx := startBank(t, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	for _, ks := range []*tidekvpb.KeySpace{{Name: "orders"}, {Name: "cache", Mode: "hashed", TtlMs: 60_000}} {
		if _, err := c.CreateKeySpace(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	db := func(n int) *redis.Client {
		rc := redis.NewClient(&redis.Options{Addr: tc.nodes[n].RedisAddr(), DB: n, MaxRetries: -1})
		t.Cleanup(func() { rc.Close() })
		return rc
	}
	orders, cache, other := db(1), db(2), db(1)
	keys := []string{"a", "b", "c", "d"}
	for _, rc := range []*redis.Client{orders, cache} {
		err := rc.Watch(ctx, func(tx *redis.Tx) error {
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.Set(ctx, k, "v"+k, 0)
				}
				p.IncrBy(ctx, "n", 7)
				return nil
			})
			return err
		}, "w")
		if err != nil {
			t.Fatalf("EXEC in database %d: %v", rc.Options().DB, err)
		}
		if got, err := rc.MGet(ctx, append(keys, "n")...).Result(); err != nil || fmt.Sprint(got) != "[va vb vc vd 7]" {
			t.Fatalf("database %d after EXEC: %v, %v", rc.Options().DB, got, err)
		}
	}
	if _, err := c.Get(ctx, []byte("a")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a in the default key space: %v, want not found", err)
	}
	for _, k := range append(keys, "n") {
		if ttl, err := cache.PTTL(ctx, k).Result(); err != nil || ttl <= 50*time.Second || ttl > time.Minute {
			t.Errorf("PTTL %s in the cache key space = %v, %v; want its default of 1m", k, ttl, err)
		}
		if ttl, err := orders.PTTL(ctx, k).Result(); err != nil || ttl != -1 {
			t.Errorf("PTTL %s in orders = %v, %v; want none", k, ttl, err)
		}
	}
	err := orders.Watch(ctx, func(tx *redis.Tx) error {
		if err := other.Set(ctx, "w", "changed", 0).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "a", "lost", 0)
			return nil
		})
		return err
	}, "w")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("EXEC after a watched key changed in database 1: %v, want %v", err, redis.TxFailedErr)
	}
	if v, err := orders.Get(ctx, "a").Result(); err != nil || v != "va" {
		t.Fatalf("a in database 1 after the aborted EXEC = %q, %v", v, err)
	}
	// Database 0's transactions stay out of the named key spaces' area.
	_, err = db(0).TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "\xff\xff\x00\x00\x00\x01a", "x", 0)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "reserved for named key spaces") {
		t.Fatalf("EXEC of a reserved key in database 0: %v", err)
	}
}

// The gateway node is killed in the middle of an MSET over two ranges,
// just after its first key was written (or, run as a transaction, kept for
// the commit; Config.redisWrote stops it there): afterwards both keys are
// there or neither, as Redis's MSET is atomic.
func TestRedisMSetAllOrNothingWhenTheGatewayDies(t *testing.T) {
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var f faultNodes
	nodes := 0
	tc, c, ctx := startBank(t, f.adjust, func(c *Config) {
		c.Redis.ListenAddr = "127.0.0.1:0"
		if nodes++; nodes == 1 {
			c.redisWrote = func() { once.Do(func() { close(reached); <-release }) }
		}
	})
	gw := redis.NewClient(&redis.Options{Addr: tc.nodes[0].RedisAddr(), MaxRetries: -1})
	defer gw.Close()
	keys := []string{string(acct(0)) + "m", string(acct(bankAccounts-1)) + "m"}
	done := make(chan error, 1)
	go func() { done <- gw.MSet(ctx, keys[0], "1", keys[1], "1").Err() }()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("MSET ended (%v) without writing a key", err)
	}
	eng := tc.kill(0, f.parts[0])
	close(release)
	t.Logf("MSET through the killed gateway: %v", <-done)
	tc.restartOn(ctx, 0, eng)
	// Read both keys in one snapshot once the ranges serve again and the
	// MSET's intents, if any, are resolved (pushed after its coordinator
	// stopped heartbeating).
	eventually(t, 30*time.Second, "reading the MSET's keys", func() error {
		var found []bool
		err := c.Txn(ctx, func(tx *client.Tx) error {
			found = found[:0]
			for _, k := range keys {
				r, err := tx.GetVersion(ctx, []byte(k))
				if err != nil {
					return err
				}
				found = append(found, r.Found)
			}
			return nil
		})
		if err == nil && found[0] != found[1] {
			t.Fatalf("after the gateway died mid-MSET: %s found %v, %s found %v; want both or neither", keys[0], found[0], keys[1], found[1])
		}
		return err
	})
}
