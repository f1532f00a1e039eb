package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSlowReaderDisconnected: a client that pipelines GETs of 512 KiB
// values and never reads is disconnected once a write of its replies waits
// OutputTimeout, and while it waits the node holds about MaxOutputBuffer
// for it, not the 89 MiB of replies to the 178 GETs one 4 KiB read holds.
func TestSlowReaderDisconnected(t *testing.T) {
	kv := newFakeKV()
	s, rc := start(t, kv, func(c *Config) {
		c.MaxOutputBuffer = 2 << 20
		c.OutputTimeout = time.Second
	}, nil)
	ctx := context.Background()
	eq(t, must(rc.Set(ctx, "big", bytes.Repeat([]byte("v"), 512<<10), 0).Result()), "OK")

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A small receive buffer, so the kernel holds little of the replies.
	_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
	get := "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n"
	if _, err := io.WriteString(c, strings.Repeat(get, 2000)); err != nil {
		t.Fatal(err)
	}
	var peak uint64
	deadline := time.Now().Add(10 * time.Second)
	for s.Disconnects(ReasonOutputBuffer) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a client that does not read was not disconnected in 10 s (OutputTimeout 1 s)")
		}
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		time.Sleep(5 * time.Millisecond)
	}
	// The budget: the 2 MiB buffer and its growth, a batch of 2 values and
	// garbage the GC has not collected yet, well below 89 MiB.
	if grew := int64(peak) - int64(base); grew > 24<<20 {
		t.Errorf("the heap grew by %d bytes while the client did not read; want at most %d", grew, 24<<20)
	} else {
		t.Logf("heap grew by at most %d bytes", grew)
	}
	// The client sees the connection end, after what it was sent.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !isReset(err) {
		t.Fatalf("the slow client's connection did not end: %v", err)
	}
	for n := s.conns.Load(); n != 1; n = s.conns.Load() { // rc's
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want 1", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	eq(t, len(must(rc.Get(ctx, "big").Result())), 512<<10)
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// TestRepliesOverOutputBuffer: a client that reads gets every reply, in
// order, however many times its replies fill the buffer; MGET is read a
// batch at a time.
func TestRepliesOverOutputBuffer(t *testing.T) {
	kv := newFakeKV()
	_, rc := start(t, kv, func(c *Config) { c.MaxOutputBuffer = 1 << 20 }, nil)
	ctx := context.Background()
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		eq(t, must(rc.Set(ctx, keys[i], strings.Repeat(fmt.Sprint(i%10), 300<<10), 0).Result()), "OK")
	}
	p := rc.Pipeline()
	var gets []*redis.StringCmd
	for _, k := range keys {
		gets = append(gets, p.Get(ctx, k))
	}
	p.Echo(ctx, "end")
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, g := range gets {
		if v := must(g.Result()); v != strings.Repeat(fmt.Sprint(i%10), 300<<10) {
			t.Fatalf("GET %s: %d bytes of %q...", keys[i], len(v), v[:1])
		}
	}
	// Under the KV's lock: the replies come through writev, which the race
	// detector does not see as ordering the server's writes before them.
	kv.mu.Lock()
	kv.reads = 0
	kv.mu.Unlock()
	vals := must(rc.MGet(ctx, keys...).Result())
	for i, v := range vals {
		if v != strings.Repeat(fmt.Sprint(i%10), 300<<10) {
			t.Fatalf("MGET element %d is wrong", i)
		}
	}
	// 1 MiB / the 1 MiB bulk limit: one key per read.
	kv.mu.Lock()
	defer kv.mu.Unlock()
	eq(t, kv.reads, len(keys))
}

// failingKV fails every BatchGet after the first ok.
type failingKV struct {
	*fakeKV
	ok int
}

func (f *failingKV) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	if f.ok == 0 {
		return nil, ErrUnavailable
	}
	f.ok--
	return f.fakeKV.BatchGet(ctx, keys)
}

// TestMGetFailsMidway: an MGET whose second batch fails keeps the values of
// the first and answers each later key with the error.
func TestMGetFailsMidway(t *testing.T) {
	kv := &failingKV{fakeKV: newFakeKV(), ok: 1}
	kv.m[string(encKey([]byte("a")))] = []byte("1")
	_, rc := start(t, kv, func(c *Config) { c.MaxOutputBuffer = 1 << 20 }, nil)
	vals, err := rc.MGet(context.Background(), "a", "b", "c").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := "ERR " + ErrUnavailable.Error()
	if len(vals) != 3 || vals[0] != "1" || fmt.Sprint(vals[1]) != want || fmt.Sprint(vals[2]) != want {
		t.Fatalf("MGET = %q, want [1 %q %q]", vals, want, want)
	}
}

// TestWholeReadsBoundedByOutputBuffer: HGETALL, HKEYS, HVALS and TKV.RANGE
// of more than the output buffer are refused with a sentence naming the
// limit instead of being read whole into the node's memory; HLEN, which
// only counts, still answers; smaller reads are unchanged.
func TestWholeReadsBoundedByOutputBuffer(t *testing.T) {
	kv := newFakeKV()
	_, rc := start(t, kv, func(c *Config) { c.MaxOutputBuffer = 1 << 20; c.MaxScanCount = 7 }, nil)
	ctx := context.Background()
	big := strings.Repeat("x", 200<<10)
	for i := range 12 { // 2.4 MB of fields, read in pages of 7
		eq(t, must(rc.HSet(ctx, "h", fmt.Sprint("f", i), big).Result()), int64(1))
		eq(t, must(rc.Set(ctx, fmt.Sprint("s", i), big, 0).Result()), "OK")
	}
	for _, cmd := range []string{"HGETALL", "HKEYS", "HVALS"} {
		wantErr(t, rc.Do(ctx, cmd, "h").Err(), "ERR hash of more than 1048576 bytes: "+cmd)
	}
	eq(t, must(rc.HLen(ctx, "h").Result()), int64(12))
	wantErr(t, rc.Do(ctx, "TKV.RANGE", "s", "t").Err(), "ERR TKV.RANGE reply of more than 1048576 bytes")
	// Under the limit: answered as before, across pages.
	eq(t, len(must(rc.Do(ctx, "TKV.RANGE", "s", "t", "LIMIT", "5").Slice())), 10)
	for i := range 4 {
		eq(t, must(rc.HSet(ctx, "small", fmt.Sprint("f", i), "v").Result()), int64(1))
	}
	eq(t, len(must(rc.HGetAll(ctx, "small").Result())), 4)
	eq(t, must(rc.HLen(ctx, "small").Result()), int64(4))
	eq(t, must(rc.HLen(ctx, "missing").Result()), int64(0))
}
