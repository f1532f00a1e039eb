package resp

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSetExpiryOptions: SET's EX, PX, KEEPTTL, NX, XX and GET, with
// Redis's replies and errors; a plain SET clears a TTL, and time passes
// on the fake's clock.
func TestSetExpiryOptions(t *testing.T) {
	ctx := context.Background()
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)
	ttl := func(k string) int64 { t.Helper(); return must(rc.Do(ctx, "TTL", k).Int64()) }
	pttl := func(k string) int64 { t.Helper(); return must(rc.Do(ctx, "PTTL", k).Int64()) }

	eq(t, must(rc.Do(ctx, "SET", "k", "v", "EX", "10").Text()), "OK")
	eq(t, ttl("k"), 10)
	eq(t, pttl("k"), 10000)
	kv.clock.Advance(1400 * time.Millisecond)
	eq(t, ttl("k"), 9) // 8.6 s, rounded as Redis does
	eq(t, pttl("k"), 8600)
	eq(t, ttl("missing"), -2)
	eq(t, pttl("missing"), -2)
	eq(t, must(rc.Do(ctx, "SET", "k", "v2").Text()), "OK")
	eq(t, ttl("k"), -1)

	eq(t, must(rc.Do(ctx, "SET", "k", "v", "PX", "1500").Text()), "OK")
	eq(t, must(rc.Do(ctx, "SET", "k", "v3", "keepttl").Text()), "OK")
	eq(t, pttl("k"), 1500)
	eq(t, must(rc.Get(ctx, "k").Result()), "v3")
	kv.clock.Advance(1500 * time.Millisecond)
	wantNil(t, rc.Get(ctx, "k").Err())
	eq(t, ttl("k"), -2)
	eq(t, must(rc.Exists(ctx, "k").Result()), 0)

	// NX and XX see an expired key as absent; GET returns the old value
	// and, without KEEPTTL, the TTL goes.
	eq(t, must(rc.Do(ctx, "SET", "n", "v", "NX", "EX", "5").Text()), "OK")
	eq(t, ttl("n"), 5)
	wantNil(t, rc.Do(ctx, "SET", "n", "w", "NX").Err())
	eq(t, must(rc.Do(ctx, "SET", "n", "w", "XX", "PX", "100").Text()), "OK")
	eq(t, pttl("n"), 100)
	eq(t, must(rc.Do(ctx, "SET", "n", "x", "XX", "GET", "KEEPTTL").Text()), "w")
	eq(t, pttl("n"), 100)
	eq(t, must(rc.Do(ctx, "SET", "n", "y", "GET").Text()), "x")
	eq(t, ttl("n"), -1)
	kv.clock.Advance(time.Second)
	eq(t, must(rc.Do(ctx, "SET", "e", "v", "PX", "10").Text()), "OK")
	kv.clock.Advance(10 * time.Millisecond)
	wantNil(t, rc.Do(ctx, "SET", "e", "w", "XX").Err())
	wantNil(t, rc.Do(ctx, "SET", "e", "w", "NX", "GET").Err())

	for _, args := range [][]any{
		{"EX", "0"}, {"EX", "-1"}, {"PX", "0"}, {"EX", "9999999999999999"},
	} {
		wantErr(t, rc.Do(ctx, append([]any{"SET", "k", "v"}, args...)...).Err(), "ERR invalid expire time in 'set' command")
	}
	wantErr(t, rc.Do(ctx, "SET", "k", "v", "EX", "ten").Err(), "ERR value is not an integer or out of range")
	for _, args := range [][]any{
		{"EX", "1", "PX", "1"}, {"EX", "1", "KEEPTTL"}, {"KEEPTTL", "PX", "5"}, {"NX", "XX"}, {"EX"}, {"FOO"},
	} {
		wantErr(t, rc.Do(ctx, append([]any{"SET", "k", "v"}, args...)...).Err(), "ERR syntax error")
	}
	for _, args := range [][]any{{"EXAT", "1", "EX", "1"}, {"PXAT", "1", "KEEPTTL"}} {
		wantErr(t, rc.Do(ctx, append([]any{"SET", "k", "v"}, args...)...).Err(), "ERR syntax error")
	}
	wantErr(t, rc.Do(ctx, "SET", "k", "v", "EXAT", "0").Err(), "ERR invalid expire time in 'set' command")

	// EXAT and PXAT are Unix times; one already past leaves no key.
	kv.clock.Set(time.Unix(kv.clock.Now().Unix()+1, 0)) // a whole second
	now := kv.clock.Now()
	eq(t, must(rc.Do(ctx, "SET", "a", "v", "EXAT", now.Unix()+20).Text()), "OK")
	eq(t, ttl("a"), 20)
	eq(t, must(rc.Do(ctx, "SET", "a", "v", "PXAT", now.UnixMilli()+1500).Text()), "OK")
	eq(t, pttl("a"), 1500)
	eq(t, must(rc.Do(ctx, "SET", "a", "w", "PXAT", now.UnixMilli()-1, "GET").Text()), "v")
	eq(t, ttl("a"), -2)
}

func wantNil(t *testing.T, err error) {
	t.Helper()
	if err != redis.Nil {
		t.Fatalf("err = %v, want a nil reply", err)
	}
}

// TestExpireCommands: EXPIRE, PEXPIRE, PERSIST and TTL as in Redis,
// counters and hashes keeping their TTL.
func TestExpireCommands(t *testing.T) {
	ctx := context.Background()
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)
	ttl := func(k string) int64 { t.Helper(); return must(rc.Do(ctx, "TTL", k).Int64()) }
	do := func(args ...any) int64 { t.Helper(); return must(rc.Do(ctx, args...).Int64()) }

	eq(t, do("EXPIRE", "missing", "10"), 0)
	eq(t, do("PERSIST", "missing"), 0)
	must(rc.Set(ctx, "p", "v", 0).Result())
	eq(t, do("PERSIST", "p"), 0) // no TTL to remove
	eq(t, do("EXPIRE", "p", "10"), 1)
	eq(t, ttl("p"), 10)
	eq(t, do("PEXPIRE", "p", "2500"), 1)
	eq(t, do("PTTL", "p"), 2500)
	eq(t, do("PERSIST", "p"), 1)
	eq(t, ttl("p"), -1)
	eq(t, must(rc.Get(ctx, "p").Result()), "v")
	eq(t, do("EXPIRE", "p", "1"), 1)
	kv.clock.Advance(time.Second)
	eq(t, do("EXPIRE", "p", "10"), 0) // expired: gone
	must(rc.Set(ctx, "p", "v", 0).Result())
	eq(t, do("EXPIRE", "p", "0"), 1) // a non-positive time deletes
	eq(t, ttl("p"), -2)
	eq(t, do("PEXPIRE", "p", "-5"), 0)
	wantErr(t, rc.Do(ctx, "EXPIRE", "p", "ten").Err(), "ERR value is not an integer or out of range")
	wantErr(t, rc.Do(ctx, "EXPIRE", "p", "9999999999999999").Err(), "ERR invalid expire time in 'expire' command")
	wantErr(t, rc.Do(ctx, "EXPIRE", "p", "10", "SOON").Err(), "ERR Unsupported option SOON")
	wantErr(t, rc.Do(ctx, "PEXPIREAT", "p", "ten").Err(), "ERR value is not an integer or out of range")

	// EXPIREAT and PEXPIREAT: Unix times; one already past removes the
	// key.
	kv.clock.Set(time.Unix(kv.clock.Now().Unix()+1, 0)) // a whole second
	now := kv.clock.Now()
	eq(t, do("EXPIREAT", "missing", now.Unix()+5), 0)
	must(rc.Set(ctx, "p", "v", 0).Result())
	eq(t, do("EXPIREAT", "p", now.Unix()+5), 1)
	eq(t, ttl("p"), 5)
	eq(t, do("PEXPIREAT", "p", now.UnixMilli()+250), 1)
	eq(t, do("PTTL", "p"), 250)
	eq(t, do("PEXPIREAT", "p", now.UnixMilli()-1), 1)
	eq(t, ttl("p"), -2)
	must(rc.Set(ctx, "p", "v", 0).Result())
	eq(t, do("EXPIREAT", "p", 0), 1)
	eq(t, ttl("p"), -2)

	must(rc.Do(ctx, "SET", "c", "1", "EX", "100").Result())
	eq(t, must(rc.Incr(ctx, "c").Result()), 2)
	eq(t, ttl("c"), 100)

	// A hash's TTL is its marker's: HSET keeps it, and the hash expires
	// whole.
	must(rc.HSet(ctx, "h", "f", "1").Result())
	eq(t, do("EXPIRE", "h", "10"), 1)
	must(rc.HSet(ctx, "h", "g", "2").Result())
	eq(t, ttl("h"), 10)
	kv.clock.Advance(10 * time.Second)
	wantNil(t, rc.HGet(ctx, "h", "f").Err())
	eq(t, len(must(rc.HGetAll(ctx, "h").Result())), 0)
	eq(t, must(rc.Type(ctx, "h").Result()), "none")
	// EXPIRE 0 on a hash deletes its fields too.
	must(rc.HSet(ctx, "h", "f", "1").Result())
	eq(t, do("EXPIRE", "h", "0"), 1)
	eq(t, len(kv.m), 1) // c alone
}

// TestExpireOptions: EXPIRE's NX, XX, GT and LT as in Redis (a key without
// TTL expires never: GT leaves it, LT sets it), EXPIRETIME and PEXPIRETIME.
func TestExpireOptions(t *testing.T) {
	ctx := context.Background()
	kv := newFakeKV()
	kv.clock.Set(time.Unix(1_800_000_000, 0))
	_, rc := start(t, kv, func(c *Config) { c.Now = kv.clock.Now }, nil)
	do := func(args ...any) int64 { t.Helper(); return must(rc.Do(ctx, args...).Int64()) }
	must(rc.Set(ctx, "k", "v", 0).Result())

	eq(t, do("EXPIRE", "k", "100", "XX"), 0) // no TTL yet
	eq(t, do("EXPIRE", "k", "100", "GT"), 0) // none counts as never
	eq(t, do("TTL", "k"), -1)
	eq(t, do("EXPIRETIME", "k"), -1)
	eq(t, do("EXPIRE", "k", "100", "NX"), 1)
	eq(t, do("EXPIRE", "k", "50", "NX"), 0)
	eq(t, do("EXPIRE", "k", "50", "GT"), 0)
	eq(t, do("EXPIRE", "k", "200", "gt"), 1)
	eq(t, do("EXPIRE", "k", "300", "LT"), 0)
	eq(t, do("EXPIRE", "k", "150", "XX", "LT"), 1)
	eq(t, do("TTL", "k"), 150)
	eq(t, do("EXPIRETIME", "k"), 1_800_000_150)
	eq(t, do("PEXPIRETIME", "k"), 1_800_000_150_000)
	eq(t, do("PEXPIREAT", "k", 1_800_000_120_000, "LT"), 1)
	eq(t, do("PTTL", "k"), 120_000)
	eq(t, do("EXPIREAT", "k", 1_800_000_130, "LT"), 0)
	eq(t, must(rc.Get(ctx, "k").Result()), "v")
	eq(t, do("EXPIRE", "k", "-1", "XX"), 1) // the condition holds, the time has passed: deleted
	eq(t, do("EXPIRETIME", "k"), -2)
	eq(t, do("EXPIRE", "missing", "10", "LT"), 0)

	must(rc.Set(ctx, "p", "v", 0).Result())
	eq(t, do("EXPIRE", "p", "100", "LT"), 1) // none counts as never: any time is earlier
	wantErr(t, rc.Do(ctx, "EXPIRE", "p", "10", "NX", "XX").Err(), "ERR NX and XX, GT or LT options at the same time are not compatible")
	wantErr(t, rc.Do(ctx, "EXPIRE", "p", "10", "GT", "LT").Err(), "ERR GT and LT options at the same time are not compatible")
	eq(t, do("TTL", "p"), 100) // refused commands change nothing
}
