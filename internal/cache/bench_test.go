package cache

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRecencyTouch is what a request in a key space with a capacity
// pays for recency, with the memory full (every touch of a new key
// forgets one).
func BenchmarkRecencyTouch(b *testing.B) {
	r := NewRecency(100_000)
	keys := make([][]byte, 200_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:%08d", i)
	}
	now := time.Unix(1000, 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Touch(keys[i%len(keys)], now.Add(time.Duration(i)))
	}
}

// BenchmarkDecide is one round's decision for a node leading 16 ranges
// (16 × 256 sampled keys).
func BenchmarkDecide(b *testing.B) {
	cfg := DefaultConfig()
	now := time.Unix(1000, 0)
	sp := Space{Name: "cache", Capacity: 1 << 30, Held: 1<<30 + 1<<25, Led: 1<<30 + 1<<25}
	for i := range 16 * cfg.SampleKeys {
		sp.Sample = append(sp.Sample, Candidate{Key: fmt.Appendf(nil, "k%06d", i), Range: uint64(i % 16), Bytes: 1024, LastUsed: now.Add(-time.Duration(i*7919%4096) * time.Second)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Decide(sp, cfg, now)
	}
}
