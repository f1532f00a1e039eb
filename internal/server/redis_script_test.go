package server

import (
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// transferScript moves ARGV[1] from KEYS[1] to KEYS[2] by reading both
// balances and writing them back (GET and SET, not INCRBY): were a
// script not atomic, two of them on one account would lose an update and
// the total would drift. It returns the two balances it wrote.
const transferScript = `
local f = tonumber(redis.call('get', KEYS[1]))
local g = tonumber(redis.call('get', KEYS[2]))
redis.call('set', KEYS[1], f - ARGV[1])
redis.call('set', KEYS[2], g + ARGV[1])
return {f - ARGV[1], g + ARGV[1]}`

// Scripts moving money between accounts on two ranges, run by EVALSHA
// (loaded on each node, as redis-py's register_script does) through every
// node's listener at once: every snapshot scan sees the total, and so does
// the end. Each script reads both accounts and writes both: one
// transaction, retried whole on a conflict.
func TestRedisScriptTransfersKeepTheTotal(t *testing.T) {
	tc, c, ctx := startBank(t, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	rcs := redisClients(t, tc)
	var sha string
	for _, rc := range rcs {
		s, err := rc.ScriptLoad(ctx, transferScript).Result()
		if err != nil {
			t.Fatal(err)
		}
		sha = s
	}
	const want = bankAccounts * bankStart
	var committed, gaveUp atomic.Int64
	stop := make(chan struct{})
	wg := untilStopped(4, stop, func(w int, rng *rand.Rand) bool {
		from, to := rng.Intn(bankAccounts/2), bankAccounts/2+rng.Intn(bankAccounts/2)
		if rng.Intn(2) == 0 {
			from, to = to, from
		}
		keys := []string{string(acct(from)), string(acct(to))}
		switch err := rcs[w%len(rcs)].EvalSha(ctx, sha, keys, 1+rng.Intn(10)).Err(); {
		case err == nil:
			committed.Add(1)
		case strings.HasPrefix(err.Error(), "ERR transaction gave up after"):
			gaveUp.Add(1) // MaxTxnAttempts conflicts in a row, applying nothing
		default:
			t.Errorf("transfer script: %v", err)
			return false
		}
		return true
	})
	const minTransfers = 20
	scans, failed := scanTotals(ctx, c, want, func() bool { return committed.Load() >= minTransfers })
	close(stop)
	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	t.Logf("%d script transfers, %d gave up; %d snapshot scans", committed.Load(), gaveUp.Load(), scans)
	if committed.Load() < minTransfers {
		t.Fatalf("only %d script transfers committed", committed.Load())
	}
	eventually(t, 10*time.Second, "the total", func() error {
		if total, at, err := bankTotal(ctx, c); err != nil || total != want {
			return fmt.Errorf("total %d at %s, want %d (%v)", total, at, want, err)
		}
		return nil
	})
}
