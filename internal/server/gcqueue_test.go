package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/ksconfig"
)

// userTotalBytes sums the versioned bytes of the user ranges the nodes
// lead: what the range holds on disk and ships in a snapshot.
func (tc *testCluster) userTotalBytes(t *testing.T) int64 {
	t.Helper()
	var total int64
	for _, s := range tc.nodes {
		for _, r := range s.store.Replicas() {
			if r.RangeID() == keys.MetaRangeID || !r.IsLeader() || !r.VersionedLayout() {
				continue
			}
			st, err := r.MVCCStats()
			if err != nil {
				t.Fatal(err)
			}
			total += st.TotalBytes
		}
	}
	return total
}

// An overwrite workload's ranges stop growing once gc-ttl (set through
// the cluster setting) is short: each leaseholder's GC queue removes what
// is older, says so in an event per pass, and reports the garbage it
// keeps.
func TestGCQueueBoundsOverwrites(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) {
		c.GC.Interval = 200 * time.Millisecond
		c.GC.MinGarbageBytes = 4 << 10
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, bad := range []struct{ value, want string }{{"0s", "gc-ttl must be between 1s and 720h0m0s, not 0s"}, {"1000h", "not 1000h0m0s"}, {"soon", "invalid duration"}} {
		if _, err := c.Settings(ctx, map[string]string{"gc-ttl": bad.value}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("gc-ttl = %s: %v, want an error saying %q", bad.value, err, bad.want)
		}
	}
	if _, err := c.Settings(ctx, map[string]string{"gc-ttl": "1s"}); err != nil {
		t.Fatal(err)
	}
	if v, u := tc.layouts(); len(v) == 0 || len(u) != 0 {
		t.Fatalf("versioned ranges %v, unversioned %v: a new cluster's are all versioned", v, u)
	}
	value := strings.Repeat("v", 200)
	var totals, puts []int64
	written := 0
	for second := range 8 {
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			k := fmt.Sprintf("k%02d", written%20)
			if err := c.Put(ctx, []byte(k), []byte(value)); err != nil {
				t.Fatal(err)
			}
			written++
		}
		totals, puts = append(totals, tc.userTotalBytes(t)), append(puts, int64(written))
		t.Logf("after %d s: %d puts, %d bytes of versions", second+1, written, totals[second])
	}
	// Without GC the total grows with every put (about 220 bytes a
	// version); with it, it holds at about what gc-ttl plus a queue
	// interval of puts write: well under what the last 4 s wrote, however
	// fast the loaded machine let them go.
	if recent, last := puts[7]-puts[3], totals[7]; last > (recent+20)*250 {
		t.Fatalf("versions kept growing under GC: %d bytes after 8 s, more than the last 4 s of puts (%d) wrote", last, recent)
	}
	tc.waitEvents(t, [3]string{"gc", "garbage", ""})
	var removed uint64
	for _, s := range tc.nodes {
		removed += s.store.Stats().GCVersionsRemoved.Load()
	}
	if removed == 0 {
		t.Fatal("no node counts removed versions")
	}
	// The garbage kept for gc-ttl shows in the range listing.
	waitUntil(t, func() bool {
		resp, err := c.Ranges(ctx)
		for _, ri := range resp.GetRanges() {
			if ri.GetGarbageBytes() > 0 {
				return err == nil
			}
		}
		return false
	})
}

// waitUntil polls cond for up to 30 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30 s")
		}
	}
}

// keySpaceVersions sums the versions and live keys of key space id's
// ranges at their leaseholders.
func (tc *testCluster) keySpaceVersions(t *testing.T, id keyspace.ID) (versions, live int64) {
	t.Helper()
	for _, s := range tc.nodes {
		for _, r := range s.store.Replicas() {
			if d := r.Desc(); d == nil || !r.IsLeader() || !r.VersionedLayout() || keyspace.Of(d.GetStartKey()) != id {
				continue
			}
			st, err := r.MVCCStats()
			if err != nil {
				t.Fatal(err)
			}
			versions, live = versions+st.Versions, live+st.LiveKeys
		}
	}
	return versions, live
}

// A memory key space with a short gc-ttl of its own, and one whose
// default is the (here short) longest transaction, are collected down to
// their newest versions, while a Pebble key space overwritten alike keeps
// its versions for the cluster's 10 minutes; a read of a memory key
// space below its GC threshold is refused.
//
// The queue's loop never ticks here: the test runs one round itself once
// every version but the newest is older than gc-ttl, so that round must
// remove exactly those. (With the loop on, a round during the writes
// keeps the young versions, and what it keeps stays if it is less than
// MinGarbageBytes: how many depends on when the round came.)
func TestGCQueueKeySpaceTTL(t *testing.T) {
	const minGarbage = 1 << 10
	tc := startClusterWith(t, 3, func(c *Config) {
		c.GC.Interval, c.GC.MemoryInterval = time.Hour, time.Hour
		c.GC.MinGarbageBytes, c.GC.MemoryMinGarbageBytes = minGarbage, minGarbage
		c.Txn.MaxDuration = time.Second
	})
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "bad", Engine: "memory", GcTtlMs: -1000}); err == nil ||
		!strings.Contains(err.Error(), "gc-ttl -1s must not be negative") {
		t.Fatalf("negative gc-ttl: %v, want it refused", err)
	}
	made := map[string]ksconfig.KeySpace{}
	for _, k := range []*tidekvpb.KeySpace{{Name: "cache", Rf: 3, Engine: "memory", GcTtlMs: 1000}, {Name: "plain", Rf: 3, Engine: "memory"}, {Name: "docs", Rf: 3}} {
		resp, err := c.CreateKeySpace(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		made[k.Name] = ksconfig.FromAPI(resp)
	}
	if made["cache"].GCTTL != time.Second || made["docs"].GCTTL != 0 {
		t.Fatalf("created with gc-ttl %v and %v, want 1s and unset", made["cache"].GCTTL, made["docs"].GCTTL)
	}
	cat := ksconfig.NewCatalogue([]ksconfig.KeySpace{made["cache"], made["plain"], made["docs"]})
	eventually(t, 30*time.Second, "ranges split at the key spaces' bounds", func() error { return checkKeySpaceRanges(ctx, c, cat) })
	before := c.Now()
	const keys, rounds = 5, 100
	for _, name := range []string{"cache", "plain", "docs"} {
		ks, err := c.KeySpace(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys * rounds {
			if err := ks.Put(ctx, fmt.Appendf(nil, "k%d", i%keys), fmt.Appendf(nil, "%0200d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var written int64 // no version is newer: each was stamped by a clock read here
	for _, s := range tc.nodes {
		written = max(written, s.store.HLC().Now().WallTime)
	}
	waitUntil(t, func() bool {
		for _, s := range tc.nodes {
			cat := s.ks.Catalogue()
			for _, k := range made {
				if _, ok := cat.ByID(k.ID); !ok {
					return false // its ranges would get the cluster's 10 minutes
				}
			}
			if s.store.HLC().Now().WallTime-written < time.Second.Nanoseconds() {
				return false
			}
		}
		return true
	})
	for _, s := range tc.nodes {
		s.gc.Round(ctx)
	}
	for _, name := range []string{"cache", "plain"} {
		if v, live := tc.keySpaceVersions(t, made[name].ID); v != keys || live != keys {
			t.Fatalf("%s: %d versions and %d live keys at the leaseholders after a round past gc-ttl, want %d of each", name, v, live, keys)
		}
	}
	v, _ := tc.keySpaceVersions(t, made["docs"].ID)
	if v < keys*rounds {
		t.Fatalf("the Pebble key space kept %d versions of %d puts, within the cluster's gc-ttl", v, keys*rounds)
	}
	t.Logf("after %d puts to each key space: versions kept: cache %d, plain %d, docs %d", keys*rounds, keys, keys, v)
	cache, _ := c.KeySpace(ctx, "cache")
	if _, err := cache.Get(ctx, []byte("k0"), client.ReadAt(before)); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "is below the GC threshold") {
		t.Fatalf("read of the collected key space at %s: %v, want it refused below the GC threshold", before, err)
	}
	tc.waitEvents(t, [3]string{"gc", "retention 1s, key space cache's gc-ttl", ""}, [3]string{"gc", "retention 1s, memory key space plain's default", ""},
		[3]string{"gc", "retention 10m0s, the cluster's gc-ttl", ""})
}
