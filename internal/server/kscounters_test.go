package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// TestKeySpaceHitsAndMisses: point reads are counted as hits or misses by
// the node that serves them, through gRPC and Redis alike, and `ctl
// keyspace list` sums the nodes' counts (carried by their heartbeats).
func TestKeySpaceHitsAndMisses(t *testing.T) {
	tc := startClusterWith(t, 3, func(c *Config) { c.Redis.ListenAddr = "127.0.0.1:0" })
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.CreateKeySpace(ctx, &tidekvpb.KeySpace{Name: "pages", Mode: "hashed"}); err != nil {
		t.Fatal(err)
	}
	ks, err := c.KeySpace(ctx, "pages")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := ks.Put(ctx, fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 { // 4 hits, 2 misses through gRPC
		_, _ = ks.Get(ctx, fmt.Appendf(nil, "k%d", i))
	}
	if _, err := ks.BatchGet(ctx, [][]byte{[]byte("k0"), []byte("nope")}); err != nil { // 1 hit, 1 miss
		t.Fatal(err)
	}
	for _, n := range tc.nodes { // 3 hits, 3 misses through Redis, one of each per node
		rdb := redis.NewClient(&redis.Options{Addr: n.RedisAddr(), DB: 1})
		_ = rdb.Get(ctx, "k1").Err()
		_ = rdb.Get(ctx, "absent").Err()
		rdb.Close()
	}
	eventually(t, 15*time.Second, "ctl keyspace list sums the nodes' hits and misses", func() error {
		all, err := c.KeySpaces(ctx)
		if err != nil {
			return err
		}
		if got := all[1]; got.GetHits() != 8 || got.GetMisses() != 6 {
			return fmt.Errorf("listed %d hits and %d misses, want 8 and 6", got.GetHits(), got.GetMisses())
		}
		return nil
	})
}
