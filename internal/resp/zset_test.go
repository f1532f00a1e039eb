package resp

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// scanCountKV counts the keys its scans return: what a sorted-set
// command reads of the index.
type scanCountKV struct {
	*fakeKV
	mu      sync.Mutex
	scanned int
}

func (k *scanCountKV) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	kvs, err := k.fakeKV.Scan(ctx, start, end, limit)
	k.mu.Lock()
	k.scanned += len(kvs)
	k.mu.Unlock()
	return kvs, err
}

// read runs f and returns how many index keys it scanned.
func (k *scanCountKV) read(f func()) int {
	k.mu.Lock()
	k.scanned = 0
	k.mu.Unlock()
	f()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.scanned
}

// TestZSetRangeReadsWhatItAnswers: a score range with LIMIT reads about
// the members it answers, whatever the set's size; a rank range reads its
// start rank too; ZRANK reads up to the member (the costs docs/redis.md
// states).
func TestZSetRangeReadsWhatItAnswers(t *testing.T) {
	kv := &scanCountKV{fakeKV: newFakeKV()}
	_, rc := start(t, kv, nil, nil)
	ctx := context.Background()
	const n = 3000
	for i := 0; i < n; i += 500 {
		var zs []redis.Z
		for j := i; j < i+500; j++ {
			zs = append(zs, redis.Z{Score: float64(j), Member: "m" + strconv.Itoa(j)})
		}
		eq(t, must(rc.ZAdd(ctx, "z", zs...).Result()), int64(500))
	}
	eq(t, must(rc.ZCard(ctx, "z").Result()), int64(n))

	var got []string
	read := kv.read(func() {
		got = must(rc.ZRangeByScore(ctx, "z", &redis.ZRangeBy{Min: "(1500", Max: "+inf", Count: 10}).Result())
	})
	eq(t, len(got), 10)
	eq(t, got[0], "m1501")
	eq(t, read, 10)

	read = kv.read(func() { got = must(rc.ZRange(ctx, "z", 0, 9).Result()) })
	eq(t, got[9], "m9")
	eq(t, read, 10)
	read = kv.read(func() { got = must(rc.ZRange(ctx, "z", 100, 109).Result()) })
	eq(t, got[0], "m100")
	eq(t, read, 110) // the start rank is walked to

	read = kv.read(func() { eq(t, must(rc.ZRank(ctx, "z", "m2000").Result()), int64(2000)) })
	eq(t, read, 2000)
	read = kv.read(func() { eq(t, must(rc.ZScore(ctx, "z", "m2999").Result()), 2999.0) })
	eq(t, read, 0)
}

// TestZSetWriteRetried: a sorted-set write whose transaction is retried
// after conflicts counts what its committed attempt did, once.
func TestZSetWriteRetried(t *testing.T) {
	kv := newFakeKV()
	_, rc := start(t, kv, nil, nil)
	ctx := context.Background()
	eq(t, must(rc.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "a"}).Result()), int64(1))
	kv.mu.Lock()
	kv.conflicts = 3
	kv.mu.Unlock()
	eq(t, must(rc.ZAddArgs(ctx, "z", redis.ZAddArgs{Ch: true, Members: []redis.Z{{Score: 2, Member: "a"}, {Score: 1, Member: "b"}}}).Result()), int64(2))
	kv.mu.Lock()
	kv.conflicts = 2
	kv.mu.Unlock()
	eq(t, must(rc.ZIncrBy(ctx, "z", 0.5, "a").Result()), 2.5)
	eq(t, must(rc.ZCard(ctx, "z").Result()), int64(2))
	eq(t, slices.Equal(must(rc.ZRange(ctx, "z", 0, -1).Result()), []string{"b", "a"}), true)
}

// TestZSetConcurrentWriters: members, index and count stay consistent
// under concurrent ZINCRBY, ZADD, ZREM and ZPOPMIN.
func TestZSetConcurrentWriters(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				m := "m" + strconv.Itoa((w+i)%7)
				switch i % 4 {
				case 0, 1:
					must(rc.ZIncrBy(ctx, "z", 1, m).Result())
				case 2:
					must(rc.ZRem(ctx, "z", m).Result())
				default:
					must(rc.ZPopMin(ctx, "z").Result())
				}
			}
		}()
	}
	wg.Wait()
	all := must(rc.ZRangeWithScores(ctx, "z", 0, -1).Result())
	eq(t, must(rc.ZCard(ctx, "z").Result()), int64(len(all)))
	for i, z := range all {
		s := must(rc.ZScore(ctx, "z", z.Member.(string)).Result())
		eq(t, s, z.Score)
		if i > 0 && (all[i-1].Score > z.Score || math.IsNaN(z.Score)) {
			t.Fatalf("out of order: %v", all)
		}
	}
}

// TestZScanPages: ZSCAN's cursor walks a set larger than COUNT in score
// order, each member once.
func TestZScanPages(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	var zs []redis.Z
	for i := range 25 {
		zs = append(zs, redis.Z{Score: float64(25 - i), Member: "m" + strconv.Itoa(i)})
	}
	must(rc.ZAdd(ctx, "z", zs...).Result())
	var got []string
	var cur uint64
	for calls := 1; ; calls++ {
		items, next := must2(t)(rc.ZScan(ctx, "z", cur, "", 10).Result())
		got = append(got, items...)
		if cur = next; cur == 0 {
			eq(t, calls, 3)
			break
		}
	}
	eq(t, len(got), 50)
	eq(t, got[0], "m24")
	eq(t, got[1], "1")
	eq(t, got[48], "m0")
}

// TestZSetTypeAndScan: TYPE says zset, and SCAN's TYPE filter tells
// sorted sets from strings and hashes, stepping over their members.
func TestZSetTypeAndScan(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	must(rc.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}).Result())
	must(rc.Set(ctx, "s", "v", 0).Result())
	must(rc.HSet(ctx, "h", "f", "v").Result())
	eq(t, must(rc.Type(ctx, "z").Result()), "zset")
	for typ, want := range map[string]string{"zset": "z", "string": "s", "hash": "h"} {
		keys, cur := must2(t)(rc.ScanType(ctx, 0, "", 100, typ).Result())
		eq(t, cur, uint64(0))
		eq(t, strings.Join(keys, ","), want)
	}
}

// TestZRandMemberHugeNegativeCount: a negative count repeats members, and
// one far beyond what a reply can hold is refused with the output-limit
// error (it once panicked making the slice, killing the node); the
// connection still serves.
func TestZRandMemberHugeNegativeCount(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	got := pipeline(t, s,
		[]string{"ZADD", "z", "0", "a"},
		[]string{"ZRANDMEMBER", "z", "-9223372036854770000"},
		[]string{"ZRANDMEMBER", "z", "-2"},
		[]string{"PING"})
	if !strings.HasPrefix(got[1], "-ERR ZRANDMEMBER reply of more than") {
		t.Errorf("ZRANDMEMBER z -9223372036854770000: %q, want the output-limit error", got[1])
	}
	if got[2] != "*[$a $a]" || got[3] != "+PONG" {
		t.Errorf("after it: %q, %q", got[2], got[3])
	}
}

// The same for SRANDMEMBER (it wrote members for ever) and HRANDFIELD with
// an empty field and value (counted as no bytes, its bound was never
// reached); each connection still serves after. -2^63 itself is out of
// range for all three, as in Redis (HRANDFIELD answered an empty array).
func TestRandHugeNegativeCount(t *testing.T) {
	s, _ := start(t, newFakeKV(), nil, nil)
	got := pipeline(t, s,
		[]string{"SADD", "s", "a"},
		[]string{"SRANDMEMBER", "s", "-9223372036854770000"},
		[]string{"HSET", "h", "", ""},
		[]string{"HRANDFIELD", "h", "-9223372036854770000"},
		[]string{"SRANDMEMBER", "s", "-2"},
		[]string{"PING"},
		[]string{"HRANDFIELD", "h", "-9223372036854775808"})
	for i, name := range map[int]string{1: "SRANDMEMBER", 3: "HRANDFIELD"} {
		if !strings.HasPrefix(got[i], "-ERR "+name+" reply of more than") {
			t.Errorf("%s with a count near -2^63: %q, want the output-limit error", name, got[i])
		}
	}
	if got[4] != "*[$a $a]" || got[5] != "+PONG" {
		t.Errorf("after them: %q, %q", got[4], got[5])
	}
	if want := "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"; got[6] != want {
		t.Errorf("HRANDFIELD h -2^63: %q, want %q", got[6], want)
	}
}

// writeCountKV counts the guarded writes and transactions sent to it.
type writeCountKV struct {
	*fakeKV
	guarded, txns atomic.Int32
}

func (k *writeCountKV) GuardedWrite(ctx context.Context, ops []Op, g Guard) (GuardResult, error) {
	k.guarded.Add(1)
	return k.fakeKV.GuardedWrite(ctx, ops, g)
}

func (k *writeCountKV) Txn(ctx context.Context, fn func(TxnKV) error) error {
	k.txns.Add(1)
	return k.fakeKV.Txn(ctx, fn)
}

// A ZADD is one transaction and no other write, also when it makes a new
// set where an earlier one left its keys (SET over it, then GETDEL): they are cleared
// in that transaction, and none reads as a member. Where the key was
// before, a first attempt stops before writing anything, to read the
// span outside a transaction (zprobe), and a second one writes. Past
// zStaleInTxn leftover keys they are cleared by one guarded write, and
// the transaction runs again.
func TestZAddIsOneTransaction(t *testing.T) {
	kv := &writeCountKV{fakeKV: newFakeKV()}
	s, _ := start(t, kv, nil, nil)
	writes := func(cmd ...string) (guarded, txns int32) {
		t.Helper()
		g, x := kv.guarded.Load(), kv.txns.Load()
		pipeline(t, s, cmd)
		return kv.guarded.Load() - g, kv.txns.Load() - x
	}
	for _, cmd := range [][]string{{"ZADD", "z", "1", "a", "2", "b"}, {"ZADD", "z", "3", "c"}, {"ZINCRBY", "z", "5", "a"}, {"SET", "z", "str"}, {"DEL", "z"}} {
		g, x := writes(cmd...)
		if cmd[0][0] == 'Z' && (g != 0 || x != 1) {
			t.Errorf("%v: %d guarded writes and %d transactions, want 0 and 1", cmd, g, x)
		}
	}
	// Leftovers: a set of 3 members, then of zStaleInTxn, replaced by SET.
	for _, n := range []int{3, zStaleInTxn} {
		add := []string{"ZADD", "old"}
		for i := range n {
			add = append(add, strconv.Itoa(i), "m"+strconv.Itoa(i))
		}
		pipeline(t, s, add)
		pipeline(t, s, []string{"SET", "old", "v"}, []string{"GETDEL", "old"})
		g, x := writes("ZADD", "old", "7", "m1")
		want := int32(0)
		if 2*n > zStaleInTxn {
			want = 1 // 2n keys (member and index entry) left
		}
		if g != want || x != 2+want {
			t.Errorf("ZADD over %d members' leftovers: %d guarded writes and %d transactions, want %d and %d", n, g, x, want, 2+want)
		}
		eqReplies(t, pipeline(t, s, []string{"ZRANGE", "old", "0", "-1", "WITHSCORES"}, []string{"ZCARD", "old"}), []string{"*[$m1 $7]", ":1"})
		pipeline(t, s, []string{"DEL", "old"})
	}
}
