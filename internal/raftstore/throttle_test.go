package raftstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestTokenBucket(t *testing.T) {
	const MiB = 1 << 20
	clk := &fakeClock{t: time.Unix(1000, 0)}
	tb := newTokenBucket(MiB, MiB, clk.now) // 1 MiB/s, burst 1 MiB
	expect := func(n int, want time.Duration) {
		t.Helper()
		if got := tb.reserve(n); got != want {
			t.Fatalf("reserve(%d) at +%v: wait %v, want %v", n, clk.t.Sub(time.Unix(1000, 0)), got, want)
		}
	}
	// A full bucket passes one burst at once; the next bytes wait for
	// the refill, and reservations queue behind each other.
	expect(MiB, 0)
	expect(MiB/2, 500*time.Millisecond)
	expect(MiB/2, time.Second)
	// Half a second later the queue is half a second shorter.
	clk.advance(500 * time.Millisecond)
	expect(MiB/4, 750*time.Millisecond)
	// Idle time refills the bucket, but never beyond one burst.
	clk.advance(time.Hour)
	expect(MiB, 0)
	expect(1, 954*time.Nanosecond) // 953.67 ns, rounded up: never short
	// A clock that steps back adds nothing.
	clk.advance(-time.Minute)
	expect(1024, time.Duration(math.Ceil(1025*1e9/MiB)))

	// Rates other than the burst: 10 bytes/s, burst 100.
	tb = newTokenBucket(10, 100, clk.now)
	expect(100, 0)
	expect(5, 500*time.Millisecond)
	clk.advance(2 * time.Second) // +20 tokens: balance 15
	expect(15, 0)
	expect(10, time.Second)
}

// throttledReader over a fake clock: reading 3.5 MiB at 1 MiB/s with a
// 1 MiB burst waits exactly 2.5 s in all, in reads of at most one burst.
func TestThrottledReader(t *testing.T) {
	const MiB = 1 << 20
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var total atomic.Uint64
	data := bytes.Repeat([]byte("x"), 7*MiB/2)
	var waits []time.Duration
	tr := &throttledReader{r: bytes.NewReader(data), tb: newTokenBucket(MiB, MiB, clk.now), max: MiB, now: clk.now, total: &total,
		wait: func(d time.Duration) error {
			waits = append(waits, d)
			clk.advance(d)
			return nil
		}}
	buf := make([]byte, 4*MiB)
	var got int
	for {
		n, err := tr.Read(buf)
		if n > MiB {
			t.Fatalf("read %d bytes at once, more than a burst", n)
		}
		got += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got != len(data) {
		t.Fatalf("read %d of %d bytes", got, len(data))
	}
	if tr.waited != 2500*time.Millisecond || total.Load() != uint64(tr.waited) {
		t.Fatalf("waited %v (total %v), want 2.5s; waits %v", tr.waited, time.Duration(total.Load()), waits)
	}

	// A failed wait (context canceled, store stopped) ends the read.
	stop := fmt.Errorf("stopped")
	tr = &throttledReader{r: bytes.NewReader(data), tb: newTokenBucket(MiB, MiB, clk.now), max: MiB, now: clk.now, total: &total,
		wait: func(time.Duration) error { return stop }}
	if _, err := io.ReadAll(tr); err != stop {
		t.Fatalf("read through a failing wait: %v", err)
	}
}

// A replica addition ships the range as a snapshot under the store's cap:
// about 2.5 MiB at 1 MiB/s with a 1 MiB burst needs at least 1.5 s.
func TestSnapshotBandwidthCap(t *testing.T) {
	const (
		MiB  = 1 << 20
		rate = MiB
	)
	tc := newTestCluster(t, 3, func(c *Config) {
		c.SnapshotBytesPerSecond = rate
		c.CatchUpTimeout = time.Minute
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	val := string(bytes.Repeat([]byte("v"), 64<<10))
	for i := range 40 {
		tc.put(fmt.Sprintf("k%02d", i), val)
	}
	n4 := tc.addNode()
	sentBytes := func() (n uint64, throttled time.Duration) {
		for _, s := range tc.stores {
			n += s.Stats().SnapshotBytesSent.Load()
			throttled += time.Duration(s.Stats().SnapshotThrottleNanos.Load())
		}
		return n, throttled
	}
	start := time.Now()
	d, err := tc.leader(testRangeID).ChangeReplicas(ctx, n4, 0)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if countVoters(d) != 4 {
		t.Fatalf("after add: %s", FormatReplicas(d))
	}
	sent, throttled := sentBytes()
	t.Logf("%d snapshot bytes sent in %v, throttled %v", sent, took, throttled)
	if sent < 40*64<<10 {
		t.Fatalf("only %d snapshot bytes sent", sent)
	}
	// Lower bounds are strict: every byte past the burst waited for its
	// token. The upper bound only catches a cap gone badly wrong.
	if floor := time.Duration(float64(sent-MiB) / rate * float64(time.Second)); took < floor || took < 1500*time.Millisecond {
		t.Fatalf("added in %v; the cap allows no less than %v", took, floor)
	}
	if throttled < time.Second {
		t.Fatalf("throttled only %v", throttled)
	}
	if took > 30*time.Second {
		t.Fatalf("added in %v: far slower than the cap", took)
	}
	waitFor(t, func() bool { _, ok, _ := tc.engines[n4].Get(dataKey("k39")); return ok })
}

// A rate change applies from the moment it is made: tokens earned before it
// at the old rate are kept, the debt is paid at the new rate.
func TestTokenBucketSetRate(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	tb := newTokenBucket(10, 100, clk.now)
	if d := tb.reserve(100); d != 0 {
		t.Fatalf("burst: %v", d)
	}
	clk.advance(time.Second) // +10 at the old rate
	tb.setRate(100)
	if got := tb.currentRate(); got != 100 {
		t.Fatalf("rate %v", got)
	}
	if d := tb.reserve(110); d != time.Second { // balance 10 − 110 = −100 at 100/s
		t.Fatalf("after the change: wait %v", d)
	}
}
