package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/backup"
	"github.com/tidekv/tidekv/internal/ksconfig"
)

// pausedSource holds a backup before its second page (the second range
// here) until resume is closed.
type pausedSource struct {
	*backup.ClientSource
	pages          int
	paused, resume chan struct{}
}

func (p *pausedSource) Scan(ctx context.Context, ks string, after []byte, limit int, ts hlc.Timestamp) ([]backup.Pair, error) {
	if p.pages++; p.pages == 2 {
		close(p.paused)
		<-p.resume
	}
	return p.ClientSource.Scan(ctx, ks, after, limit, ts)
}

// pairsSink is a restore target that keeps what it is given.
type pairsSink struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *pairsSink) KeySpaces(context.Context) ([]ksconfig.Settings, error) { return nil, nil }
func (s *pairsSink) StageKeySpace(context.Context, ksconfig.Settings) error { return nil }
func (s *pairsSink) Publish(context.Context, []string) error                { return nil }
func (s *pairsSink) Empty(context.Context) (bool, error)                    { return true, nil }
func (s *pairsSink) Write(_ context.Context, ks string, pairs []backup.Pair) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pairs {
		s.m[ks+"/"+string(p.Key)] = string(p.Value)
	}
	return nil
}

// gcCluster is a cluster whose GC queue runs only when the test says
// (gcNow), with the cluster's gc-ttl at its least, 1 s.
func gcCluster(t *testing.T) (*testCluster, *client.Client, context.Context) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.GC.Interval, c.GC.MemoryInterval = time.Hour, time.Hour
		c.GC.MinGarbageBytes, c.GC.MemoryMinGarbageBytes = 0, 0
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	if _, err := c.Settings(ctx, map[string]string{"gc-ttl": "1s"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		for _, s := range tc.nodes {
			if s.gc.TTL() != time.Second {
				return false
			}
		}
		return true
	})
	return tc, c, ctx
}

// gcNow runs one GC round on every node, once every node's clock is more
// than gc-ttl (and twice the max offset) past every version written so
// far, with the queue's memory forgotten so that every range is looked at.
func (tc *testCluster) gcNow(ctx context.Context, t *testing.T) {
	t.Helper()
	var written int64
	for _, s := range tc.nodes {
		written = max(written, s.store.HLC().Now().WallTime)
	}
	waitUntil(t, func() bool {
		for _, s := range tc.nodes {
			if s.store.HLC().Now().WallTime-written <= time.Second.Nanoseconds() {
				return false
			}
		}
		return true
	})
	for _, s := range tc.nodes {
		s.gc.Forget()
		s.gc.Round(ctx)
	}
}

// thresholdAt is the GC threshold of the range holding key, at its
// leaseholder.
func (tc *testCluster) thresholdAt(t *testing.T, key string) hlc.Timestamp {
	t.Helper()
	for _, s := range tc.nodes {
		if r := s.store.LookupKey([]byte(key)); r != nil && r.IsLeader() {
			return r.GCThreshold()
		}
	}
	t.Fatalf("no leaseholder found for %q", key)
	return hlc.Timestamp{}
}

// A backup held between its two ranges while the second range's key is
// overwritten and GC runs with a 1-s gc-ttl still reads that key's value
// at its cut T: its protected timestamp keeps GC's safe point at T. Once
// the backup is done and its protection released, GC passes T.
func TestBackupProtectedFromGC(t *testing.T) {
	tc, c, ctx := gcCluster(t)
	if _, err := c.Split(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if err := c.Put(ctx, []byte(k), []byte(k+"-before")); err != nil {
			t.Fatal(err)
		}
	}
	src := &pausedSource{ClientSource: backup.NewClientSource(c), paused: make(chan struct{}), resume: make(chan struct{})}
	src.Owner = "backup under test"
	type result struct {
		m   *backup.Manifest
		err error
	}
	dir := t.TempDir() + "/b"
	done := make(chan result, 1)
	go func() {
		m, err := backup.Backup(ctx, src, dir, backup.Options{PageSize: 1})
		done <- result{m, err}
	}()
	<-src.paused
	for i := range 5 {
		if err := c.Put(ctx, []byte("b"), fmt.Appendf(nil, "b-after-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := c.ProtectedTimestamps(ctx)
	if err != nil || len(ps) != 1 || ps[0].GetOwner() != "backup under test" {
		t.Fatalf("protected timestamps during the backup: %v (%v), want the backup's", ps, err)
	}
	cut := ps[0].GetTimestamp().HLC()
	tc.gcNow(ctx, t)
	thr := tc.thresholdAt(t, "b")
	close(src.resume)
	res := <-done
	if res.err != nil {
		t.Fatalf("backup held across a GC round: %v", res.err)
	}
	if thr.IsZero() || cut.Less(thr) {
		t.Fatalf("GC threshold of b's range %s after a round during the backup at %s: want GC to have run, at or below the cut", thr, cut)
	}
	got := &pairsSink{m: map[string]string{}}
	if _, err := backup.Restore(ctx, got, dir, false, backup.Options{InFlight: 1}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"/a": "a-before", "/b": "b-before"}; fmt.Sprint(got.m) != fmt.Sprint(want) {
		t.Fatalf("backup at %s holds %v, want %v", res.m.Timestamp, got.m, want)
	}
	tc.waitEvents(t, [3]string{"gc", "held at protected timestamp", ""})
	if ps, err := c.ProtectedTimestamps(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("protected timestamps after the backup: %v (%v), want none", ps, err)
	}
	if err := c.Put(ctx, []byte("b"), []byte("b-last")); err != nil {
		t.Fatal(err)
	}
	tc.gcNow(ctx, t)
	if thr := tc.thresholdAt(t, "b"); !cut.Less(thr) {
		t.Fatalf("GC threshold %s after the backup released its protection at %s: want GC past it", thr, cut)
	}
}

// An abandoned protection (never renewed nor released) holds GC until it
// expires, and no longer.
func TestAbandonedProtectionExpires(t *testing.T) {
	tc, c, ctx := gcCluster(t)
	if err := c.Put(ctx, []byte("k"), []byte("v0")); err != nil {
		t.Fatal(err)
	}
	const lease = 3 * time.Second
	p, err := c.ProtectTimestamp(ctx, lease, "abandoned")
	if err != nil {
		t.Fatal(err)
	}
	held := p.GetTimestamp().HLC()
	if err := c.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	tc.gcNow(ctx, t)
	if thr := tc.thresholdAt(t, "k"); thr.IsZero() || held.Less(thr) {
		t.Fatalf("GC threshold %s under a live protection at %s: want GC to have run, at or below it", thr, held)
	}
	if v, err := c.Get(ctx, []byte("k"), client.ReadAt(held)); err != nil || string(v) != "v0" {
		t.Fatalf("read at the protected timestamp: %q, %v; want v0", v, err)
	}
	// Expired by every node's clock: its expiry plus the max offset.
	expires := time.UnixMilli(p.GetExpiresAtMs()).Add(tc.nodes[0].store.HLC().MaxOffset())
	waitUntil(t, func() bool { return time.Now().After(expires) })
	if err := c.Put(ctx, []byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	tc.gcNow(ctx, t)
	if thr := tc.thresholdAt(t, "k"); !held.Less(thr) {
		t.Fatalf("GC threshold %s after the protection at %s expired: want GC past it", thr, held)
	}
	// The next protection purges the expired record.
	q, err := c.ProtectTimestamp(ctx, time.Minute, "next")
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := c.ProtectedTimestamps(ctx); err != nil || len(ps) != 1 || ps[0].GetId() != q.GetId() {
		t.Fatalf("protections after a new one: %v (%v), want only it", ps, err)
	}
	if err := c.RenewProtection(ctx, p.GetId(), lease); err == nil {
		t.Fatal("the purged protection was renewed")
	}
}
