package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// TestEvictionKeepsKeySpaceUnderCapacity fills a key space with a capacity
// well past it on three nodes (every node holds every range): the writes
// all succeed, each node's share ends under the capacity, the keys read
// throughout are all kept, evictions are counted, and the leaseholder
// recorded why it started evicting.
func TestEvictionKeepsKeySpaceUnderCapacity(t *testing.T) {
	const capacity = 48 << 10
	tc := startClusterWith(t, 3, func(c *Config) { c.Cache.EvictInterval = 50 * time.Millisecond })
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	made, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "sessions", Mode: "hashed", CapacityPerNode: capacity})
	if err != nil {
		t.Fatal(err)
	}
	// Eviction works on the key space's own ranges.
	cat := ksconfig.NewCatalogue([]ksconfig.KeySpace{ksconfig.FromAPI(made)})
	eventually(t, 30*time.Second, "ranges split at the key space's bounds", func() error { return checkKeySpaceRanges(ctx, c, cat) })
	ks, err := c.KeySpace(ctx, "sessions")
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 1000))
	hot := func(i int) []byte { return fmt.Appendf(nil, "hot%02d", i) }
	readHot := func() {
		for i := range 8 {
			if _, err := ks.Get(ctx, hot(i)); err != nil {
				t.Fatalf("get %s: %v", hot(i), err)
			}
		}
	}
	for i := range 8 {
		if err := ks.Put(ctx, hot(i), value); err != nil {
			t.Fatal(err)
		}
	}
	// 150 KB into a 48 KiB key space; the hot keys are read between
	// every ten writes, as a cache's working set would be.
	for i := range 150 {
		if err := ks.Put(ctx, fmt.Appendf(nil, "cold%03d", i), value); err != nil {
			t.Fatalf("put %d: the write was refused (a cache key space evicts instead): %v", i, err)
		}
		if i%10 == 9 {
			readHot()
		}
	}
	// Under the capacity, and then under the low-water mark, where
	// eviction stops.
	eventually(t, 30*time.Second, "every node holds less than 95% of the capacity of the key space", func() error {
		readHot()
		for _, s := range tc.nodes {
			if held := keySpaceHeld(ctx, s, 1); held >= capacity*95/100 {
				return fmt.Errorf("node %d holds %d bytes of the key space", s.id.node, held)
			}
		}
		return nil
	})
	for i := range 8 {
		if v, err := ks.Get(ctx, hot(i)); err != nil || v == nil {
			t.Fatalf("hot key %s was evicted (%q, %v)", hot(i), v, err)
		}
	}
	var reasons []string
	for _, s := range tc.nodes {
		for _, e := range s.events.List(0) {
			if e.GetKind() == "evict" {
				reasons = append(reasons, e.GetReason())
			}
		}
	}
	// ctl keyspace list: the evictions summed over the nodes, and the
	// keys left as the last exact counts (eviction's) found them.
	eventually(t, 15*time.Second, "ctl keyspace list counts the evictions and the keys left", func() error {
		var evictions uint64
		for _, s := range tc.nodes {
			evictions += evictionsOf(s, 1)
		}
		if evictions < 50 {
			t.Fatalf("%d evictions counted, want at least the 50 keys over the capacity", evictions)
		}
		left := 0
		for i := range 150 {
			if v, err := ks.Get(ctx, fmt.Appendf(nil, "cold%03d", i)); err == nil && v != nil {
				left++
			}
		}
		all, err := c.KeySpaces(ctx)
		if err != nil {
			return err
		}
		if got := all[1]; got.GetEvictions() != evictions || got.GetKeys() != uint64(8+left) {
			return fmt.Errorf("listed %d evictions and %d keys, want %d and %d", got.GetEvictions(), got.GetKeys(), evictions, 8+left)
		}
		return nil
	})
	if len(reasons) == 0 || !strings.Contains(reasons[0], `key space "sessions" holds`) || !strings.Contains(reasons[0], "over its capacity of 48.0 KiB") {
		t.Fatalf("eviction events: %q", reasons)
	}
}

// keySpaceHeld counts the bytes of key space id's replicas on s exactly.
func keySpaceHeld(ctx context.Context, s *Server, id keyspace.ID) uint64 {
	var rs []*raftstore.Replica
	for _, r := range s.store.Replicas() {
		if keyspace.Of(r.Desc().GetStartKey()) == id {
			rs = append(rs, r)
		}
	}
	held, _ := s.ks.HeldBytes(ctx, rs, true)
	return held
}

// evictionsOf is the evictions s counted in key space id.
func evictionsOf(s *Server, id keyspace.ID) uint64 {
	for _, c := range s.ks.Counts() {
		if keyspace.ID(c.GetId()) == id {
			return c.GetEvictions()
		}
	}
	return 0
}
