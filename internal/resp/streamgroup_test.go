package resp

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

// checkPEL checks the bookkeeping of stream key's groups in kv: each
// group's pending count is its PEL's size and its consumer count its
// consumers'; each consumer's pending count is the size of its own PEL
// index, which holds exactly the PEL entries naming it.
func checkPEL(t *testing.T, kv *fakeKV, key string) {
	t.Helper()
	ctx := context.Background()
	v, err := kv.Get(ctx, encKey([]byte(key)))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := decodeStreamMeta(v)
	scan := func(pre []byte) []KeyValue { return must(kv.Scan(ctx, pre, prefixEnd(pre), 1<<20)) }
	k := []byte(key)
	for _, g := range scan(groupsSpan(k, m.gen, groupTag)) {
		gr := decodeGroup(g.Value)
		pel := scan(pendingPrefix(k, m.gen, gr.name))
		if uint64(len(pel)) != gr.pending {
			t.Errorf("group %s counts %d pending, its PEL has %d", gr.name, gr.pending, len(pel))
		}
		cs := scan(consumersPrefix(k, m.gen, gr.name))
		if uint64(len(cs)) != gr.consumers {
			t.Errorf("group %s counts %d consumers, has %d", gr.name, gr.consumers, len(cs))
		}
		owners := map[string]string{}
		for _, kv := range pel {
			p := decodePending(decodeStreamID(kv.Key[len(kv.Key)-16:]), kv.Value)
			owners[p.id.String()] = string(p.consumer)
		}
		owned := 0
		for _, c := range cs {
			co := decodeConsumer(c.Value)
			ids := scan(ownedPrefix(k, m.gen, gr.name, co.name))
			if uint64(len(ids)) != co.pending {
				t.Errorf("consumer %s counts %d pending, owns %d", co.name, co.pending, len(ids))
			}
			for _, id := range ids {
				s := decodeStreamID(id.Key[len(id.Key)-16:]).String()
				if owners[s] != string(co.name) {
					t.Errorf("consumer %s owns %s, which the PEL gives %q", co.name, s, owners[s])
				}
			}
			owned += len(ids)
		}
		if owned != len(pel) {
			t.Errorf("group %s: %d pending, %d owned", gr.name, len(pel), owned)
		}
	}
}

// TestStreamGroupPELBookkeeping: deliveries, redeliveries to another
// consumer (SETID back), history reads, acknowledgements, claims,
// DELCONSUMER and DESTROY keep every count equal to the keys counted (checkPEL); delivery
// times and counts follow the server's clock; RENAME moves it all and DEL
// leaves nothing of the groups.
func TestStreamGroupPELBookkeeping(t *testing.T) {
	kv := newFakeKV()
	clock := manualclock.New(time.UnixMilli(1_800_000_000_000))
	s, _ := start(t, kv, func(c *Config) { c.Now = clock.Now }, nil)
	w := dialRaw(t, s)
	for _, id := range []string{"1-1", "2-1", "3-1", "4-1"} {
		eq(t, w.do(t, "XADD", "s", id, "f", "v"), "$"+id)
	}
	eq(t, w.do(t, "XGROUP", "CREATE", "s", "g", "0"), "+OK")
	eq(t, w.do(t, "XGROUP", "CREATE", "s", "h", "0"), "+OK")
	w.do(t, "XREADGROUP", "GROUP", "g", "a", "COUNT", "2", "STREAMS", "s", ">")
	w.do(t, "XREADGROUP", "GROUP", "h", "a", "COUNT", "1", "STREAMS", "s", ">")
	checkPEL(t, kv, "s")
	clock.Advance(5 * time.Second)
	w.do(t, "XREADGROUP", "GROUP", "g", "b", "STREAMS", "s", ">")
	checkPEL(t, kv, "s")
	eq(t, w.do(t, "XPENDING", "s", "g", "-", "+", "10"), "*[*[$1-1 $a :5000 :1] *[$2-1 $a :5000 :1] *[$3-1 $b :0 :1] *[$4-1 $b :0 :1]]")
	// Delivered again to another consumer: the entry moves, counted once.
	eq(t, w.do(t, "XGROUP", "SETID", "s", "g", "0"), "+OK")
	w.do(t, "XREADGROUP", "GROUP", "g", "b", "COUNT", "3", "STREAMS", "s", ">")
	checkPEL(t, kv, "s")
	eq(t, w.do(t, "XPENDING", "s", "g"), "*[:4 $1-1 $4-1 *[*[$b $4]]]")
	clock.Advance(time.Second)
	eq(t, w.do(t, "XREADGROUP", "GROUP", "g", "b", "COUNT", "1", "STREAMS", "s", "3-1"), "*[*[$s *[*[$4-1 *[$f $v]]]]]")
	eq(t, w.do(t, "XPENDING", "s", "g", "IDLE", "500", "-", "+", "10"), "*[*[$1-1 $b :1000 :1] *[$2-1 $b :1000 :1] *[$3-1 $b :1000 :1]]")
	eq(t, w.do(t, "XPENDING", "s", "g", "-", "+", "10", "b"), "*[*[$1-1 $b :1000 :1] *[$2-1 $b :1000 :1] *[$3-1 $b :1000 :1] *[$4-1 $b :0 :2]]")
	eq(t, w.do(t, "XACK", "s", "g", "2-1", "2-1", "9-9"), ":1")
	checkPEL(t, kv, "s")
	// Claims move entries (FORCE makes one); a deleted entry leaves the PEL.
	eq(t, w.do(t, "XCLAIM", "s", "g", "a", "0", "1-1", "JUSTID"), "*[$1-1]")
	eq(t, w.do(t, "XCLAIM", "s", "g", "a", "0", "2-1", "FORCE", "JUSTID"), "*[$2-1]")
	checkPEL(t, kv, "s")
	eq(t, w.do(t, "XDEL", "s", "3-1"), ":1")
	eq(t, w.do(t, "XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "2", "JUSTID"), "*[$3-1 *[$1-1 $2-1] *[]]")
	eq(t, w.do(t, "XAUTOCLAIM", "s", "g", "b", "0", "0", "JUSTID"), "*[$0-0 *[$1-1 $2-1 $4-1] *[$3-1]]")
	checkPEL(t, kv, "s")
	eq(t, w.do(t, "XACK", "s", "g", "2-1"), ":1")
	eq(t, w.do(t, "XCLAIM", "s", "g", "b", "0", "3-1", "FORCE", "JUSTID"), "*[]")
	eq(t, w.do(t, "XGROUP", "CREATECONSUMER", "s", "g", "c"), ":1")
	eq(t, w.do(t, "XGROUP", "DELCONSUMER", "s", "g", "b"), ":2")
	eq(t, w.do(t, "XGROUP", "DELCONSUMER", "s", "g", "a"), ":0")
	checkPEL(t, kv, "s")
	eq(t, w.do(t, "XPENDING", "s", "g"), "*[:0 $<nil> $<nil> *<nil>]")
	eq(t, w.do(t, "RENAME", "s", "t"), "+OK")
	checkPEL(t, kv, "t")
	eq(t, w.do(t, "XPENDING", "t", "h"), "*[:1 $1-1 $1-1 *[*[$a $1]]]")
	eq(t, w.do(t, "XGROUP", "DESTROY", "t", "h"), ":1")
	checkPEL(t, kv, "t")
	v := must(kv.Get(context.Background(), encKey([]byte("t"))))
	m, _ := decodeStreamMeta(v)
	span := elemPrefix([]byte("t"), posGen(m.gen))
	left := must(kv.Scan(context.Background(), span, prefixEnd(span), 100))
	for _, l := range left {
		if !bytes.HasPrefix(l.Key, groupsSpan([]byte("t"), m.gen, consumerTag)) && !bytes.HasPrefix(l.Key, groupsSpan([]byte("t"), m.gen, groupTag)) {
			t.Errorf("after DESTROY of h and DELCONSUMER of g's busy consumers, key %q left", l.Key)
		}
	}
	eq(t, w.do(t, "DEL", "t"), ":1")
	if left := must(kv.Scan(context.Background(), span, prefixEnd(span), 100)); len(left) != 0 {
		t.Errorf("DEL left %d keys of the groups", len(left))
	}
}

// TestStreamGroupBlockingRead: XREADGROUP BLOCK with '>' waits for a new
// entry; of two consumers woken by an XADD one gets it, and the other
// waits on for the next; a history read never waits.
func TestStreamGroupBlockingRead(t *testing.T) {
	clock := manualclock.New(time.UnixMilli(1_800_000_000_000))
	s, ft := startBlocking(t, newFakeKV(), func(c *Config) { c.Now = clock.Now })
	a, b, w := dialRaw(t, s), dialRaw(t, s), dialRaw(t, s)
	eq(t, w.do(t, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"), "+OK")
	eq(t, w.do(t, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", "0"), "*[*[$s *[]]]")
	// COUNT 1: a client trying after both XADDs takes one entry.
	a.send(t, "XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", ">")
	ft.waiting(t)
	b.send(t, "XREADGROUP", "GROUP", "g", "b", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", ">")
	ft.waiting(t)
	// Both wake on each XADD; whichever tries first takes the entry.
	eq(t, w.do(t, "XADD", "s", "1-1", "f", "v"), "$1-1")
	eq(t, w.do(t, "XADD", "s", "2-1", "f", "w"), "$2-1")
	ra, rb := a.reply(t), b.reply(t)
	one, two := "*[*[$s *[*[$1-1 *[$f $v]]]]]", "*[*[$s *[*[$2-1 *[$f $w]]]]]"
	if !(ra == one && rb == two) && !(ra == two && rb == one) {
		t.Fatalf("a got %s, b %s: want one entry each", ra, rb)
	}
	first := "a"
	if ra == two {
		first = "b"
	}
	eq(t, w.do(t, "XPENDING", "s", "g"), "*[:2 $1-1 $2-1 *[*[$a $1] *[$b $1]]]")
	eq(t, w.do(t, "XPENDING", "s", "g", "-", "+", "1", first), "*[*[$1-1 $"+first+" :0 :1]]")
}

// TestStreamGroupBlockedReaderLosesItsStream: a group destroyed, or the
// stream deleted or made another type, while a client waits in
// XREADGROUP: it is answered with Redis 7.0's errors at its next try
// (here the recheck).
func TestStreamGroupBlockedReaderLosesItsStream(t *testing.T) {
	for _, c := range []struct {
		change []string
		want   string
	}{
		{[]string{"XGROUP", "DESTROY", "s", "g"}, "-NOGROUP the consumer group this client was blocked on no longer exists"},
		{[]string{"DEL", "s"}, "-UNBLOCKED the stream key no longer exists"},
		{[]string{"SET", "s", "v"}, "-UNBLOCKED the stream key no longer exists"},
	} {
		s, ft := startBlocking(t, newFakeKV(), nil)
		a, w := dialRaw(t, s), dialRaw(t, s)
		eq(t, w.do(t, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"), "+OK")
		a.send(t, "XREADGROUP", "GROUP", "g", "a", "BLOCK", "0", "STREAMS", "s", ">")
		_, recheck := ft.waiting(t)
		w.do(t, c.change...)
		recheck.fire()
		eq(t, a.reply(t), c.want)
	}
}

// TestStreamGroupDumpRestore: DUMP carries a stream's groups, consumers
// and PEL, and RESTORE rebuilds them with their counts (checkPEL); a
// stream whose groups were destroyed dumps as one that never had any.
func TestStreamGroupDumpRestore(t *testing.T) {
	kv := newFakeKV()
	clock := manualclock.New(time.UnixMilli(1_800_000_000_000))
	_, rc := start(t, kv, func(c *Config) { c.Now = clock.Now }, nil)
	ctx := context.Background()
	do := func(args ...any) string {
		v, err := rc.Do(ctx, args...).Result()
		return fmt.Sprintf("%v %v", v, err)
	}
	for _, id := range []string{"1-1", "2-1", "3-1"} {
		do("XADD", "s", id, "f", "v")
	}
	eq(t, do("XGROUP", "CREATE", "s", "g", "0"), "OK <nil>")
	eq(t, do("XGROUP", "CREATE", "s", "h", "$", "ENTRIESREAD", "-1"), "OK <nil>")
	do("XREADGROUP", "GROUP", "g", "a", "COUNT", "2", "STREAMS", "s", ">")
	do("XREADGROUP", "GROUP", "g", "b", "STREAMS", "s", ">")
	eq(t, do("XGROUP", "CREATECONSUMER", "s", "g", "idle"), "1 <nil>")
	plainBefore := must(rc.Dump(ctx, "s").Result())
	clock.Advance(time.Second)
	must(rc.Restore(ctx, "t", 0, plainBefore).Result())
	checkPEL(t, kv, "t")
	eq(t, do("XINFO", "GROUPS", "t"), do("XINFO", "GROUPS", "s"))
	eq(t, do("XPENDING", "t", "g", "-", "+", "10"), do("XPENDING", "s", "g", "-", "+", "10"))
	eq(t, do("XINFO", "STREAM", "t", "FULL"), do("XINFO", "STREAM", "s", "FULL"))
	eq(t, do("XPENDING", "t", "g"), "[3 1-1 3-1 [[a 2] [b 1]]] <nil>")
	eq(t, do("XGROUP", "DESTROY", "s", "g"), "1 <nil>")
	eq(t, do("XGROUP", "DESTROY", "s", "h"), "1 <nil>")
	plain := must(rc.Dump(ctx, "s").Result())
	must(rc.Restore(ctx, "u", 0, plain).Result())
	eq(t, do("XINFO", "GROUPS", "u"), "[] <nil>")
	must(rc.Del(ctx, "u").Result())
	do("XADD", "u", "1-1", "f", "v")
	do("XADD", "u", "2-1", "f", "v")
	do("XADD", "u", "3-1", "f", "v")
	eq(t, must(rc.Dump(ctx, "u").Result()), plain)
}
