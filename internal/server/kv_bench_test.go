package server

import (
	"context"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// BenchmarkLeaseholderGet measures a linearizable Get served by the
// leaseholder, as the KV service runs it (validation, admission, routing
// to the replica, the read, metrics), without the transport. Its allocs/op
// are what a read costs the node besides the value and the response.
func BenchmarkLeaseholderGet(b *testing.B) {
	tc := startClusterWith(b, 1, func(c *Config) { c.InMemory = false })
	ctx := context.Background()
	kv := &kvService{s: tc.nodes[0]}
	key, val := []byte("bench-key"), make([]byte, 1000)
	if err := tc.client().Put(ctx, key, val); err != nil {
		b.Fatal(err)
	}
	// Ranges move to the versioned layout once the cluster is at log
	// version 4; measure the read they then take. The migration's range
	// deletion makes Pebble build a range-deletion iterator for every read
	// while it sits in the memtable, until a flush: flush, as time would.
	for deadline := time.Now().Add(10 * time.Second); !tc.nodes[0].store.LookupKey(key).VersionedLayout(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the range did not move to the versioned layout")
		}
	}
	if err := tc.nodes[0].eng.(interface{ Flush() error }).Flush(); err != nil {
		b.Fatal(err)
	}
	req := &tidekvpb.GetRequest{Key: key}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := kv.Get(ctx, req)
		if err != nil || !resp.GetFound() {
			b.Fatalf("get: %v found %v", err, resp.GetFound())
		}
	}
}
