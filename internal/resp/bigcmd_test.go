package resp

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// bigArgs are the arguments prefix, then n words made by word.
func bigArgs(n int, word func(i int) []any, prefix ...any) []any {
	out := append([]any(nil), prefix...)
	for i := range n {
		out = append(out, word(i)...)
	}
	return out
}

func member(i int) []any { return []any{fmt.Sprintf("m%05d", i)} }

// A command writing several times MaxBatchKeys keys is served, as Redis
// serves it, in one transaction: LPUSH of 8,000 elements, SADD, ZADD and
// HSET of 3,000 members or fields, SUNIONSTORE of a 3,000-member result,
// HDEL of 1,500 fields, MSET and DEL of 5,000 keys (each fakeKV.commits
// counts one).
func TestCommandsPastMaxBatchKeysWriteAtOnce(t *testing.T) {
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)
	ctx := context.Background()
	keys := func(i int) []any { return []any{fmt.Sprintf("k%05d", i)} }
	cases := []struct {
		args []any
		want any
	}{
		{bigArgs(8000, member, "LPUSH", "l"), int64(8000)},
		{bigArgs(3000, member, "SADD", "s"), int64(3000)},
		{bigArgs(3000, func(i int) []any { return []any{i, member(i)[0]} }, "ZADD", "z"), int64(3000)},
		{bigArgs(3000, func(i int) []any { return []any{member(i)[0], "v"} }, "HSET", "h"), int64(3000)},
		{[]any{"SUNIONSTORE", "u", "s", "nokey"}, int64(3000)},
		{bigArgs(1500, member, "HDEL", "h"), int64(1500)},
		{bigArgs(5000, func(i int) []any { return []any{keys(i)[0], "v"} }, "MSET"), "OK"},
		{bigArgs(5000, keys, "DEL"), int64(5000)},
	}
	for _, c := range cases {
		before := kv.commits
		got, err := rc.Do(ctx, c.args...).Result()
		if err != nil || got != c.want || kv.commits != before+1 {
			t.Fatalf("%s of %d arguments = %v, %v in %d transactions; want %v in one", c.args[0], len(c.args)-1, got, err, kv.commits-before, c.want)
		}
	}
	for _, c := range []struct {
		args []any
		want int64
	}{{[]any{"LLEN", "l"}, 8000}, {[]any{"SCARD", "s"}, 3000}, {[]any{"ZCARD", "z"}, 3000}, {[]any{"HLEN", "h"}, 1500}, {[]any{"SCARD", "u"}, 3000},
		{bigArgs(5000, keys, "EXISTS"), 0}} {
		if got, err := rc.Do(ctx, c.args...).Int64(); err != nil || got != c.want {
			t.Errorf("%s = %d, %v; want %d", c.args[0], got, err, c.want)
		}
	}
	if got, err := rc.LRange(ctx, "l", 0, 1).Result(); err != nil || fmt.Sprint(got) != "[m07999 m07998]" {
		t.Errorf("LRANGE l 0 1 = %v, %v; want the last pushed first", got, err)
	}
	// DEL of the collections takes their elements with them.
	if got, err := rc.Del(ctx, "l", "s", "z", "h", "u", "nokey").Result(); err != nil || got != 5 {
		t.Fatalf("DEL of the collections = %d, %v; want 5", got, err)
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if len(kv.m) != 0 {
		t.Errorf("%d keys stored after DEL of everything; want none", len(kv.m))
	}
}

// A command past MaxBatchKeys keys that fails after writing some of them
// (the store refuses its 1,500th write) leaves nothing: the list, set,
// sorted set and hash stay absent, and DEL's keys stay.
func TestCommandsPastMaxBatchKeysFailWhole(t *testing.T) {
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)
	ctx := context.Background()
	keys := func(i int) []any { return []any{fmt.Sprintf("k%05d", i)} }
	if err := rc.Do(ctx, bigArgs(5000, func(i int) []any { return []any{keys(i)[0], "v"} }, "MSET")...).Err(); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected")
	kv.mu.Lock()
	kv.txFail, kv.txFailAfter = injected, 1500
	kv.mu.Unlock()
	for _, args := range [][]any{
		bigArgs(8000, member, "LPUSH", "l"),
		bigArgs(3000, member, "SADD", "s"),
		bigArgs(3000, func(i int) []any { return []any{i, member(i)[0]} }, "ZADD", "z"),
		bigArgs(3000, func(i int) []any { return []any{member(i)[0], "v"} }, "HSET", "h"),
		bigArgs(5000, keys, "DEL"),
	} {
		wantErr(t, rc.Do(ctx, args...).Err(), "ERR injected")
	}
	kv.mu.Lock()
	kv.txFail = nil
	kv.mu.Unlock()
	for _, c := range []struct {
		args []any
		want int64
	}{{[]any{"EXISTS", "l", "s", "z", "h"}, 0}, {bigArgs(5000, keys, "EXISTS"), 5000}} {
		if got, err := rc.Do(ctx, c.args...).Int64(); err != nil || got != c.want {
			t.Errorf("%s %v... = %d, %v; want %d", c.args[0], c.args[1], got, err, c.want)
		}
	}
}

// A command's deadline grows with its arguments: the request timeout for
// each MaxBatchKeys of them begun, as a command of thousands of keys makes
// that many requests' worth of calls (DEL of 5,000 keys took 2.3 s on a
// node at load 19, and more than 5 s at a higher load).
func TestCommandTimeoutGrowsWithArguments(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.MaxBatchKeys = 1000 }, nil)
	rt := s.cfg.RequestTimeout
	for _, c := range []struct {
		args int
		want time.Duration
	}{{1, rt}, {1000, rt}, {1001, 2 * rt}, {5001, 6 * rt}} {
		if got := s.timeout(c.args); got != c.want {
			t.Errorf("timeout of a command of %d arguments = %v; want %v", c.args, got, c.want)
		}
	}
}

// A command naming thousands of keys reads them in its transaction
// readBatch keys a call (a round trip to the coordinator each), not one
// a call: DEL of 5,000 keys read one by one took 2.3-2.8 s on 3 nodes at
// load 11. Keys named twice count once, as in Redis. Arguments of at
// most 16 KiB make readBatch MaxBatchKeys (1,000) here; 16 at the
// defaults, MaxBulkLen 1 MiB.
func TestCommandsPastMaxBatchKeysReadInChunks(t *testing.T) {
	kv := newFakeKV()
	s, rc := start(t, kv, func(c *Config) { c.MaxBulkLen = 16 << 10 }, nil)
	ctx := context.Background()
	per := s.readBatch()
	if per != s.cfg.MaxBatchKeys {
		t.Fatalf("readBatch = %d; want MaxBatchKeys, %d", per, s.cfg.MaxBatchKeys)
	}
	keys := func(i int) []any { return []any{fmt.Sprintf("k%05d", i)} }
	field := func(i int) []any { return []any{member(i)[0], "v"} }
	cases := []struct {
		args []any
		want any
		// reads: the most calls; the keys read, readBatch a call, and the
		// metadata's.
		reads int
	}{
		{bigArgs(5000, func(i int) []any { return []any{keys(i)[0], "v"} }, "MSETNX"), int64(1), 5},
		{bigArgs(3000, field, "HSET", "h"), int64(3000), 3 + 2},
		{bigArgs(3000, field, "HSET", "h"), int64(0), 3 + 2},
		{append(bigArgs(1500, member, "HDEL", "h"), "m00000", "nofield"), int64(1500), 2 + 1},
		{append(bigArgs(5000, keys, "DEL"), "k00000", "nokey"), int64(5000), 6},
		{bigArgs(5000, keys, "UNLINK"), int64(0), 5},
	}
	for _, c := range cases {
		kv.mu.Lock()
		kv.txReads, kv.txBatchMost = 0, 0
		kv.mu.Unlock()
		got, err := rc.Do(ctx, c.args...).Result()
		kv.mu.Lock()
		reads, most := kv.txReads, kv.txBatchMost
		kv.mu.Unlock()
		if err != nil || got != c.want {
			t.Fatalf("%s of %d arguments = %v, %v; want %v", c.args[0], len(c.args)-1, got, err, c.want)
		}
		if reads > c.reads || most > per {
			t.Errorf("%s of %d arguments: %d transactional reads, the largest of %d keys; want at most %d, of at most %d keys", c.args[0], len(c.args)-1, reads, most, c.reads, per)
		}
	}
}

// At the defaults (MaxBulkLen 1 MiB, MaxOutputBuffer 16 MiB) DEL reads 16
// keys a call, so that an answer of values of a MiB stays under 16 MiB.
func TestDelReadsBoundedByValueSize(t *testing.T) {
	kv := newFakeKV()
	s, rc := start(t, kv, nil, nil)
	ctx := context.Background()
	big := string(make([]byte, 1<<20-100))
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%03d", i)
		if err := rc.Set(ctx, keys[i], big, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	kv.mu.Lock()
	kv.txReads, kv.txBatchMost = 0, 0
	kv.mu.Unlock()
	if got, err := rc.Del(ctx, keys...).Result(); err != nil || got != 100 {
		t.Fatalf("DEL of 100 keys = %d, %v; want 100", got, err)
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if per := s.readBatch(); per != 16 || kv.txReads != 7 || kv.txBatchMost != per {
		t.Errorf("DEL of 100 keys of 1 MiB: %d reads, the largest of %d keys (readBatch %d); want 7 of at most 16", kv.txReads, kv.txBatchMost, per)
	}
}
