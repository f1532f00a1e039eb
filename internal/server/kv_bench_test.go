package server

import (
	"context"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// BenchmarkLeaseholderGet measures a linearizable Get served by the
// leaseholder, as the KV service runs it (validation, admission, routing
// to the replica, the read, metrics), without the transport. Its allocs/op
// are what a read costs the node besides the value and the response.
func BenchmarkLeaseholderGet(b *testing.B) {
	kv, key := benchLeaseholder(b, false)
	req := &tidekvpb.GetRequest{Key: key}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := kv.Get(context.Background(), req)
		if err != nil || !resp.GetFound() {
			b.Fatalf("get: %v found %v", err, resp.GetFound())
		}
	}
}

// BenchmarkLeaseholderPut measures a Put of 1000 bytes on the leaseholder
// of a 1-node range as the KV service runs it, through Raft and the apply,
// on the in-memory engine: Pebble's log sync would make the CPU a write
// costs the node a small part of a noisy figure.
func BenchmarkLeaseholderPut(b *testing.B) {
	kv, key := benchLeaseholder(b, true)
	req := &tidekvpb.PutRequest{Key: key, Value: make([]byte, 1000)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kv.Put(context.Background(), req); err != nil {
			b.Fatalf("put: %v", err)
		}
	}
}

// benchLeaseholder starts a 1-node cluster (on Pebble unless inMemory)
// with one key of 1000 bytes on the versioned layout, flushed.
func benchLeaseholder(b *testing.B, inMemory bool) (*kvService, []byte) {
	tc, key := benchNode(b, func(c *Config) { c.InMemory = inMemory })
	return &kvService{s: tc.nodes[0]}, key
}

// benchNode starts a 1-node cluster adjusted by adjust with one key of
// 1000 bytes on the versioned layout, flushed.
func benchNode(b *testing.B, adjust func(*Config)) (*testCluster, []byte) {
	tc := startClusterWith(b, 1, adjust)
	ctx := context.Background()
	key, val := []byte("bench-key"), make([]byte, 1000)
	if err := tc.client().Put(ctx, key, val); err != nil {
		b.Fatal(err)
	}
	// A new cluster's ranges are versioned from the start. The read is
	// measured from the engine's tables, as after a while: flush.
	if !tc.nodes[0].store.LookupKey(key).VersionedLayout() {
		b.Fatal("a new cluster's range is not on the versioned layout")
	}
	if f, ok := tc.nodes[0].ks.Engine().(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	return tc, key
}
