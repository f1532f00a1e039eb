package resp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

// TestStreamRangeReadsWhatItAnswers: XRANGE and XREVRANGE with COUNT read
// about the entries they answer, whatever the stream's length; XLEN reads
// the metadata alone (the costs docs/redis.md states).
func TestStreamRangeReadsWhatItAnswers(t *testing.T) {
	kv := &scanCountKV{fakeKV: newFakeKV()}
	_, rc := start(t, kv, nil, nil)
	ctx := context.Background()
	const n = 5000
	pipe := rc.Pipeline()
	for i := 1; i <= n; i++ {
		// Several entries a millisecond, and gaps, as a busy stream has.
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: fmt.Sprintf("%d-%d", 1000+i/3*7, i%3), Values: []string{"f", fmt.Sprint(i)}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	eq(t, must(rc.XLen(ctx, "s").Result()), int64(n))
	var got []redis.XMessage
	read := kv.read(func() { got = must(rc.XRangeN(ctx, "s", "5000", "+", 10).Result()) })
	eq(t, len(got), 10)
	eq(t, got[0].ID, "5004-0")
	eq(t, read, 10)
	read = kv.read(func() { got = must(rc.XRevRangeN(ctx, "s", "+", "-", 10).Result()) })
	eq(t, len(got), 10)
	eq(t, got[0].Values["f"], any(fmt.Sprint(n)))
	if read > 30 {
		t.Errorf("XREVRANGE + - COUNT 10 scanned %d keys, want about 10", read)
	}
	read = kv.read(func() { must(rc.XLen(ctx, "s").Result()) })
	eq(t, read, 0)
	read = kv.read(func() { got = must(rc.XRangeN(ctx, "s", "(3000-0", "+", 1).Result()) })
	eq(t, got[0].ID, "3002-0")
	eq(t, read, 1)
}

// TestStreamIDsGrowAcrossClocks: two nodes (two servers over one store)
// whose clocks disagree by a minute still give out growing IDs, since the
// last ID is in the stream's metadata, read and written in the
// transaction that adds the entry: a clock behind continues the sequence.
func TestStreamIDsGrowAcrossClocks(t *testing.T) {
	kv := newFakeKV()
	ahead := manualclock.New(time.UnixMilli(1_800_000_060_000))
	behind := manualclock.New(time.UnixMilli(1_800_000_000_000))
	_, a := start(t, kv, func(c *Config) { c.Now = ahead.Now }, nil)
	_, b := start(t, kv, func(c *Config) { c.Now = behind.Now }, nil)
	ctx := context.Background()
	add := func(rc *redis.Client) string {
		return must(rc.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "*", Values: []string{"f", "v"}}).Result())
	}
	eq(t, add(b), "1800000000000-0")
	eq(t, add(b), "1800000000000-1")
	eq(t, add(a), "1800000060000-0")
	eq(t, add(b), "1800000060000-1") // not 1800000000000-2
	behind.Advance(2 * time.Minute)
	eq(t, add(b), "1800000120000-0")
	eq(t, add(a), "1800000120000-1")
	info := must(a.XInfoStream(ctx, "s").Result())
	eq(t, info.LastGeneratedID, "1800000120000-1")
	eq(t, info.EntriesAdded, int64(6))
}

// TestStreamBlockingRead: XREAD BLOCK waits for an entry after the ID it
// names ("$": the last now); an XADD wakes every client reading the key
// (reading takes nothing from the others), and one reading another ID
// waits on.
func TestStreamBlockingRead(t *testing.T) {
	s, ft := startBlocking(t, newFakeKV(), nil)
	a, b, c, w := dialRaw(t, s), dialRaw(t, s), dialRaw(t, s), dialRaw(t, s)
	eq(t, w.do(t, "XADD", "s", "1-1", "f", "v"), "$1-1")
	a.send(t, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
	ft.waiting(t)
	b.send(t, "XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", "other", "s", "0", "1-1")
	ft.waiting(t)
	c.send(t, "XREAD", "BLOCK", "1500", "STREAMS", "s", "2-0")
	timeout, _ := ft.waiting(t)
	eq(t, timeout.d, 1500*time.Millisecond)
	eq(t, w.do(t, "XADD", "s", "2-0", "g", "w"), "$2-0")
	eq(t, a.reply(t), "*[*[$s *[*[$2-0 *[$g $w]]]]]")
	eq(t, b.reply(t), "*[*[$s *[*[$2-0 *[$g $w]]]]]")
	eq(t, w.do(t, "XADD", "s", "3-0", "h", "x"), "$3-0")
	eq(t, c.reply(t), "*[*[$s *[*[$3-0 *[$h $x]]]]]")
	c.send(t, "XREAD", "BLOCK", "1500", "STREAMS", "s", "$")
	// Past the recheck timers c made after the tries that found nothing
	// (one a wake; how many depends on how the wakes met).
	for timeout = ft.next(t); timeout.d != 1500*time.Millisecond; timeout = ft.next(t) {
	}
	timeout.fire()
	eq(t, c.reply(t), "*<nil>")
	// Inside MULTI nothing waits.
	eq(t, w.do(t, "MULTI"), "+OK")
	eq(t, w.do(t, "XREAD", "BLOCK", "0", "STREAMS", "s", "$"), "+QUEUED")
	eq(t, w.do(t, "EXEC"), "*[*<nil>]")
}

// TestStreamKeyspace: SCAN TYPE stream finds streams, DUMP and RESTORE
// carry a stream's entries and its IDs' state, and a stream renamed or
// copied keeps its entries.
func TestStreamKeyspace(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	for _, id := range []string{"1-1", "2-0", "3-5"} {
		must(rc.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: id, Values: []string{"f", id}}).Result())
	}
	must(rc.XDel(ctx, "s", "3-5").Result())
	must(rc.Set(ctx, "str", "v", 0).Result())
	keys, _ := must2(t)(rc.ScanType(ctx, 0, "", 100, "stream").Result())
	eq(t, strings.Join(keys, ","), "s")
	payload := must(rc.Dump(ctx, "s").Result())
	must(rc.Restore(ctx, "r", 0, payload).Result())
	eq(t, fmt.Sprint(must(rc.XRange(ctx, "r", "-", "+").Result())), fmt.Sprint(must(rc.XRange(ctx, "s", "-", "+").Result())))
	info := must(rc.XInfoStream(ctx, "r").Result())
	eq(t, info.LastGeneratedID, "3-5")
	eq(t, info.MaxDeletedEntryID, "3-5")
	eq(t, info.EntriesAdded, int64(3))
	eq(t, info.Length, int64(2))
	if err := rc.XAdd(ctx, &redis.XAddArgs{Stream: "r", ID: "3-5", Values: []string{"f", "v"}}).Err(); err == nil {
		t.Fatal("XADD of the restored stream's last ID succeeded")
	}
	must(rc.Copy(ctx, "r", "c", 0, false).Result())
	must(rc.Rename(ctx, "r", "m").Result())
	eq(t, must(rc.XLen(ctx, "c").Result()), int64(2))
	eq(t, must(rc.XLen(ctx, "m").Result()), int64(2))
	eq(t, must(rc.Exists(ctx, "r").Result()), int64(0))
	eq(t, must(rc.ObjectEncoding(ctx, "m").Result()), "stream")
}

// TestStreamApproxTrimByNodes: a "~" trim removes whole runs of
// stream-node-max-entries entries as they were added, Redis's nodes: after
// exact trims cut into a node, what is left of it goes whole (the case of
// Redis's own "XTRIM with MAXLEN option basic test").
func TestStreamApproxTrimByNodes(t *testing.T) {
	_, rc := start(t, newFakeKV(), nil, nil)
	ctx := context.Background()
	pipe := rc.Pipeline()
	for i := range 1000 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: fmt.Sprintf("%d-1", i+1), Values: []string{"f", "v"}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	trim := func(args ...any) int64 {
		t.Helper()
		return must(rc.Do(ctx, append([]any{"XTRIM", "s"}, args...)...).Int64())
	}
	eq(t, trim("MAXLEN", "666"), int64(334))
	eq(t, trim("MAXLEN", "=", "555"), int64(111))
	eq(t, trim("MAXLEN", "~", "444"), int64(55)) // the rest of the fifth node
	eq(t, must(rc.XLen(ctx, "s").Result()), int64(500))
	eq(t, trim("MAXLEN", "~", "400"), int64(100))
	eq(t, trim("MAXLEN", "~", "0", "LIMIT", "250"), int64(200)) // whole nodes up to LIMIT
	eq(t, trim("MINID", "~", "950"), int64(100))                // the node ending at 900-1 only
	eq(t, must(rc.XLen(ctx, "s").Result()), int64(100))
}

// TestStreamConcurrentAutoIDs: XADD * from many connections at once
// (batched in one transaction or retried) gives every entry its own ID,
// and each client's IDs grow in the order its XADDs were answered.
func TestStreamConcurrentAutoIDs(t *testing.T) {
	kv := newFakeKV()
	kv.clock = manualclock.New(time.UnixMilli(1_800_000_000_000)) // one millisecond for all: sequences
	_, rc := start(t, kv, func(c *Config) { c.Now = kv.clock.Now }, nil)
	ctx := context.Background()
	const clients, each = 8, 50
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			var last string
			for range each {
				id, err := rc.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "*", Values: []string{"c", fmt.Sprint(c)}}).Result()
				if err == nil && last != "" && !idLess(last, id) {
					err = fmt.Errorf("client %d got %s after %s", c, id, last)
				}
				if err != nil {
					errs <- err
					return
				}
				last = id
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	es := must(rc.XRange(ctx, "s", "-", "+").Result())
	eq(t, len(es), clients*each)
	for i := 1; i < len(es); i++ {
		if !idLess(es[i-1].ID, es[i].ID) {
			t.Fatalf("entry %d has ID %s after %s", i, es[i].ID, es[i-1].ID)
		}
	}
}

// idLess compares two IDs as XADD gives them.
func idLess(a, b string) bool {
	x, _, _ := parseStreamID([]byte(a), 0, true, false)
	y, _, _ := parseStreamID([]byte(b), 0, true, false)
	return x.less(y)
}
