package raftstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

func ts(wall int64) hlc.Timestamp { return hlc.Timestamp{WallTime: wall} }

// The timestamp cache answers the highest read of a key or span, bounded:
// eviction raises the low-water mark over what it drops, never below.
func TestTSCache(t *testing.T) {
	span := func(a, b string) keySpan {
		if b == "" {
			return keySpan{start: []byte(a)}
		}
		return keySpan{start: []byte(a), end: []byte(b)}
	}
	pt := func(k string) keySpan { return pointSpan([]byte(k)) }
	c := newTSCache(4, 2)
	steps := []struct {
		add   keySpan
		at    int64
		raise int64
		check keySpan
		want  int64
	}{
		{check: pt("a"), want: 0},
		{add: pt("a"), at: 10, check: pt("a"), want: 10},
		{check: pt("b"), want: 0},
		{add: pt("a"), at: 5, check: pt("a"), want: 10}, // a lower read changes nothing
		{add: span("c", "f"), at: 20, check: pt("d"), want: 20},
		{check: pt("f"), want: 0},         // the end is exclusive
		{check: span("e", "z"), want: 20}, // spans overlap
		{check: span("", ""), want: 20},   // unbounded covers all
		{check: span("a", "b"), want: 10}, // a span finds points
		{add: span("x", ""), at: 30, check: pt("zz"), want: 30},
		{add: span("m", "n"), at: 40, check: pt("m"), want: 40}, // third span: older half evicted
		{check: pt("d"), want: 30},                              // low-water is the median (30)
		{raise: 50, check: pt("m"), want: 50},
		{add: pt("q"), at: 45, check: pt("q"), want: 50}, // below the low-water: nothing
	}
	for i, s := range steps {
		if s.raise != 0 {
			c.raise(ts(s.raise))
		}
		if s.at != 0 {
			c.add(s.add, ts(s.at), "")
		}
		if got := c.max(s.check, ""); got != ts(s.want) {
			t.Fatalf("step %d: max(%q..%q) = %v, want %d", i, s.check.start, s.check.end, got, s.want)
		}
	}
	big := newTSCache(3, 3)
	for i, k := range []string{"a", "b", "c", "d"} {
		big.add(pt(k), ts(int64(i+1)), "")
	}
	if len(big.points) > 3 || big.lowWater.IsZero() || big.max(pt("d"), "") != ts(4) || big.max(pt("a"), "") != big.lowWater {
		t.Fatalf("eviction: %d points, low-water %v, d at %v, a at %v", len(big.points), big.lowWater, big.max(pt("d"), ""), big.max(pt("a"), ""))
	}
}

// A transaction's write is not pushed above its own reads, only above
// other readers'; a tie between two readers is nobody's own.
func TestTSCacheOwnReads(t *testing.T) {
	c := newTSCache(8, 4)
	k := pointSpan([]byte("k"))
	c.add(k, ts(10), "other")
	c.add(k, ts(20), "T")
	if got := c.max(k, "T"); got != ts(0) {
		t.Fatalf("T's own read at 20 over another's at 10 (replaced): max for T = %v, want the low-water mark", got)
	}
	if got := c.max(k, ""); got != ts(20) {
		t.Fatalf("max for a plain write = %v, want 20", got)
	}
	c.add(k, ts(20), "U")
	if got := c.max(k, "T"); got != ts(20) {
		t.Fatalf("T and U both read at 20: max for T = %v, want 20", got)
	}
	c.add(keySpan{start: []byte("a"), end: []byte("z")}, ts(30), "T")
	if got, other := c.max(k, "T"), c.max(k, "U"); got != ts(20) || other != ts(30) {
		t.Fatalf("T's span read at 30: max for T = %v (want 20), for U = %v (want 30)", got, other)
	}
}

// A write is stamped above reads of its keys and closed timestamps, and a
// read waits only for latches at or below its timestamp on its keys.
func TestReadOrder(t *testing.T) {
	o := newReadOrder()
	a, b := []keySpan{pointSpan([]byte("a"))}, []keySpan{pointSpan([]byte("b"))}
	if l := o.stamp(a, ts(10), ""); l.ts != ts(10) {
		t.Fatalf("unread key: stamped %v, want 10", l.ts)
	} else {
		o.release(l, false)
	}
	o.read(a, ts(20), "")
	la := o.stamp(a, ts(15), "")
	if !ts(20).Less(la.ts) {
		t.Fatalf("write under a read at 20 stamped %v", la.ts)
	}
	lb := o.stamp(b, ts(15), "")
	if lb.ts != ts(15) {
		t.Fatalf("a read of a did not push a write of b: %v", lb.ts)
	}
	if got, _ := o.read(b, ts(14), ""); len(got) != 0 {
		t.Fatalf("a read below the latch waits for %d latches", len(got))
	}
	if got, _ := o.read(b, ts(15), ""); len(got) != 1 || got[0] != lb {
		t.Fatalf("a read at the latch's timestamp waits for %v", got)
	}
	if got, _ := o.read(append(a, b...), ts(100), ""); len(got) != 2 {
		t.Fatalf("a read of both keys waits for %d latches, want 2", len(got))
	}
	// Closing stays below the lowest write in flight (b at 15).
	if c := o.close(ts(1000)); !c.Less(ts(15)) {
		t.Fatalf("closed %v with a write at 15 in flight", c)
	}
	o.release(lb, false)
	o.release(la, false)
	if c := o.close(ts(1000)); c != ts(1000) {
		t.Fatalf("closed %v with nothing in flight, want 1000", c)
	}
	if c := o.close(ts(500)); c != ts(1000) {
		t.Fatalf("closed timestamps went back to %v", c)
	}
	if l := o.stamp(b, ts(900), ""); !ts(1000).Less(l.ts) {
		t.Fatalf("write stamped %v at or under the closed timestamp 1000", l.ts)
	}
}

// On a 3-node range: a write after a read at T of its key lands above T
// (the read at T still sees the old value), a read at T waits for a write
// in flight at or below T, and a read too far in the future is refused.
func TestReadsAtTimestampsOnLeaseholder(t *testing.T) {
	_, r := startWithK(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A read slightly ahead of the clock: the next write must be stamped
	// above it (the read moved the clock there, and the cache says so too;
	// TestReadOrder shows the cache alone) and wait for the clock to pass.
	at := readAhead(ctx, t, r, 20*time.Millisecond)
	if _, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("v2")}}); err != nil {
		t.Fatal(err)
	}
	if v, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: at}); err != nil || string(v) != "v1" {
		t.Fatalf("read at %v after a write: %q, %v; want v1 (the write must land above the read)", at, v, err)
	}
	if r.store.Now().UnixNano() < at.WallTime {
		t.Fatalf("the write was acknowledged before the clock passed %v", at)
	}

	// A latch at or below the read's timestamp holds the read back.
	l := r.order.stamp([]keySpan{pointSpan([]byte("k"))}, r.store.hlc.Now(), "")
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: l.ts})
		done <- err
	}()
	below := prev(l.ts)
	if _, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: below}); err != nil {
		t.Fatalf("read below the latch: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("a read at the latch's timestamp returned (%v) before the write applied", err)
	case <-time.After(100 * time.Millisecond):
	}
	r.order.release(l, false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A write whose outcome became unknown (leadership moved with it
	// pending) may still commit elsewhere below the read: the read that
	// waited for it goes to the new leaseholder instead of reading here.
	l = r.order.stamp([]keySpan{pointSpan([]byte("k"))}, r.store.hlc.Now(), "")
	go func() {
		_, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: l.ts})
		done <- err
	}()
	for waiting := false; !waiting; time.Sleep(time.Millisecond) {
		r.order.mu.Lock()
		waiting = l.done != nil // made when the read starts waiting
		r.order.mu.Unlock()
	}
	r.order.release(l, true)
	var nl *NotLeaderError
	if err := <-done; !errors.As(err, &nl) {
		t.Fatalf("a read that waited for a write of unknown outcome: %v, want a NotLeaderError", err)
	}

	future := r.store.hlc.Now()
	future.WallTime += int64(time.Second)
	_, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: future})
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "in the future") {
		t.Fatalf("read 1 s ahead: %v", err)
	}
}

// A follower serves a read at T once its applied closed timestamp reaches
// T, and refuses it before.
func TestFollowerReadsAtClosedTimestamp(t *testing.T) {
	tc, lead := startWithK(t)
	at := lead.store.hlc.Now()
	tc.put("k", "v2")
	var f *Replica
	for _, id := range tc.nodes {
		if r := tc.stores[id].GetReplica(testRangeID); !r.IsLeader() {
			f = r
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ro := ReadOptions{Mode: tidekvpb.ReadMode_ANY, Timestamp: at}
	var stale *StaleReplicaError
	if _, _, err := f.Get(ctx, []byte("k"), ro); !errors.As(err, &stale) {
		t.Fatalf("follower read before any closed timestamp: %v, want StaleReplicaError", err)
	}
	waitFor(t, func() bool {
		tc.publishClosed()
		v, ok, err := f.Get(ctx, []byte("k"), ro)
		return err == nil && ok && string(v) == "v1"
	})
	if c := f.closed.Load(); !at.Less(c.ts) {
		t.Fatalf("closed %v, not above %v", c.ts, at)
	}
}

// BenchmarkStampWrite measures what the timestamp cache and latches add to
// a one-key write on the leaseholder: stamping it and releasing its latch,
// with an empty cache and with a full one (4096 keys and 64 spans read at
// timestamps).
func BenchmarkStampWrite(b *testing.B) {
	for _, full := range []bool{false, true} {
		o := newReadOrder()
		if full {
			for i := range tsCachePoints {
				o.read([]keySpan{pointSpan(fmt.Appendf(nil, "read-%05d", i))}, ts(int64(i+1)), "")
			}
			for i := range tsCacheSpans {
				o.read([]keySpan{{start: fmt.Appendf(nil, "span-%05d", i), end: fmt.Appendf(nil, "span-%05d~", i)}}, ts(int64(i+1)), "")
			}
		}
		key := []byte("bench-key")
		b.Run(fmt.Sprintf("full=%v", full), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				o.release(o.stamp([]keySpan{pointSpan(key)}, ts(int64(1e6+i)), ""), false)
			}
		})
	}
}

// An elected leaseholder stamps writes above its clock by the part of
// 2 × max offset beyond half the election timeout: none at a quarter of
// it, 30 ms at 40 ms of a 100 ms election timeout.
func TestLeaseLowWater(t *testing.T) {
	for _, c := range []struct {
		offset, margin time.Duration
	}{{25 * time.Millisecond, 0}, {40 * time.Millisecond, 30 * time.Millisecond}} {
		tc := newTestCluster(t, 1, func(cfg *Config) { cfg.MaxClockOffset = c.offset })
		r := tc.leader(testRangeID)
		before := r.store.hlc.Now()
		lw := r.leaseLowWater()
		after := r.store.hlc.Now()
		lo, hi := before.WallTime+int64(c.margin), after.WallTime+int64(c.margin)
		if lw.WallTime < lo || lw.WallTime > hi {
			t.Errorf("max offset %v: low-water %v, want the clock + %v", c.offset, lw, c.margin)
		}
		if r.order.cache.lowWater.IsZero() {
			t.Errorf("max offset %v: the lease started without a low-water mark", c.offset)
		}
	}
}

// A lease transfer hands over the highest read the old leaseholder served:
// the new one stamps its writes above it, though its clock is behind (the
// nodes' physical clock stands still, so the read stays ahead of it).
func TestLeaseTransferHandsOverReads(t *testing.T) {
	clock := manualclock.New(time.Now())
	tc, old := startWithK(t, func(c *Config) { c.Clock = clock })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at := readAhead(ctx, t, old, 15*time.Millisecond) // ahead of every node's clock
	target := old.store.nodeID%3 + 1
	if err := old.TransferLease(target); err != nil {
		t.Fatal(err)
	}
	var r *Replica
	waitFor(t, func() bool {
		r = tc.stores[target].GetReplica(testRangeID)
		return r.IsLeader()
	})
	writeKeepsReadAt(ctx, t, r, at)
}

// startWithK starts a 3-node range on the versioned layout holding k = v1
// and returns its leaseholder.
func startWithK(t *testing.T, mutate ...func(*Config)) (*testCluster, *Replica) {
	tc := newTestCluster(t, 3, mutate...)
	tc.migrate(t, testRangeID)
	tc.put("k", "v1")
	return tc, tc.leader(testRangeID)
}

// readAhead reads k = v1 on r at d ahead of r's clock and returns the
// timestamp it read at.
func readAhead(ctx context.Context, t *testing.T, r *Replica, d time.Duration) hlc.Timestamp {
	t.Helper()
	at := r.store.hlc.Now()
	at.WallTime += int64(d)
	if v, ok, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: at}); err != nil || !ok || string(v) != "v1" {
		t.Fatalf("read at %v: %q %v %v", at, v, ok, err)
	}
	return at
}

// A read served at T under one lease must hold through two transfers in a
// row: the middle leaseholder learns of T only as the start of its lease
// and must hand it on, or the last one stamps a write below T and a read
// at T changes.
func TestReadHoldsThroughTwoTransfers(t *testing.T) {
	clock := manualclock.New(time.Now())
	tc, old := startWithK(t, func(c *Config) { c.Clock = clock })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at := readAhead(ctx, t, old, 15*time.Millisecond)
	mid := old.store.nodeID%3 + 1
	last := mid%3 + 1
	if err := old.TransferLease(mid); err != nil {
		t.Fatal(err)
	}
	var r *Replica
	waitFor(t, func() bool { r = tc.stores[mid].GetReplica(testRangeID); return r.IsLeader() })
	waitFor(t, func() bool { return r.TransferLease(last) == nil })
	waitFor(t, func() bool { r = tc.stores[last].GetReplica(testRangeID); return r.IsLeader() })
	writeKeepsReadAt(ctx, t, r, at)
}

// writeKeepsReadAt writes k = v2 through the leaseholder r, whose clock
// must still be behind at (else nothing is tested), and checks that a read
// at at still finds v1, as it did before the lease moved.
func writeKeepsReadAt(ctx context.Context, t *testing.T, r *Replica, at hlc.Timestamp) {
	t.Helper()
	if now := r.store.hlc.Now(); !now.Less(at) {
		t.Fatalf("the leaseholder's clock (%v) passed the read (%v) before it wrote: nothing tested", now, at)
	}
	if _, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("k"), Value: []byte("v2")}}); err != nil {
		t.Fatal(err)
	}
	if v, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: at}); err != nil || string(v) != "v1" {
		t.Fatalf("read at %v after the lease moved and a write: %q, %v; want v1, as read before", at, v, err)
	}
}

// A read at a timestamp that reaches the leaseholder after it handed its
// reads on to a transferee (with the MsgTimeoutNow) is refused: served
// through ReadIndex while the transfer is on its way, it would not be in
// what the transferee stamps its writes above, and a read at that
// timestamp could change once the transferee wins.
func TestReadAfterHandoffIsRefused(t *testing.T) {
	clock := manualclock.New(time.Now())
	tc, old := startWithK(t, func(c *Config) { c.Clock = clock })
	to := old.store.nodeID%3 + 1
	gate := &heldTimeoutNow{Store: tc.stores[to], rangeID: testRangeID, held: make(chan struct{}), release: make(chan struct{})}
	tc.net.Register(to, gate)
	release := releaser(t, gate.release)
	if err := old.TransferLease(to); err != nil {
		t.Fatal(err)
	}
	<-gate.held
	at := old.store.hlc.Now()
	at.WallTime += int64(15 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _, err := old.Get(ctx, []byte("k"), ReadOptions{Timestamp: at})
	var nl *NotLeaderError
	if !errors.As(err, &nl) {
		t.Fatalf("a read at %v after the handoff answered %v; want NotLeaderError (the transferee may write under it)", at, err)
	}
	release()
	var r *Replica
	waitFor(t, func() bool { r = tc.stores[to].GetReplica(testRangeID); return r.IsLeader() })
	if v, _, err := r.Get(ctx, []byte("k"), ReadOptions{Timestamp: at}); err != nil || string(v) != "v1" {
		t.Fatalf("the new leaseholder's read at %v: %q, %v", at, v, err)
	}
}
