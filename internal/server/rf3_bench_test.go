package server

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRF3Put writes 1,000-byte values from 32 concurrent writers
// through the native client into a 3-node cluster on Pebble, every range
// on all three nodes (a closed loop, as YCSB-A's writes). cpu-µs/op is
// the process's CPU per write from getrusage: the three nodes and the
// client together, so a change to the write path shows as a change of it
// without a cluster of processes (docs/benchmarks/cost.md). p99-µs is
// the 99th percentile of a write's latency, which a change that saves
// CPU by waiting longer would raise.
func BenchmarkRF3Put(b *testing.B) {
	tc := startClusterWith(b, 3, func(c *Config) { c.InMemory = false })
	c := tc.client()
	tc.waitReplicated(c, 3)
	val := make([]byte, 1000)
	var next atomic.Uint64
	// One slot per write, indexed by its sequence number (b.N in all).
	lat := make([]time.Duration, b.N)
	b.SetParallelism(16) // 32 writers on 2 CPUs
	cpu0 := processCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			key := fmt.Appendf(nil, "rf3-%05d", i%20000)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			start := time.Now()
			err := c.Put(ctx, key, val)
			lat[i-1] = time.Since(start)
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/float64(time.Microsecond), "cpu-µs/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100])/float64(time.Microsecond), "p99-µs")
}

// processCPU is the user and system CPU the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
