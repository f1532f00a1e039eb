package server

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
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
// CPU by waiting longer would raise. The rest say how the closed loop
// batches, per write and over the three nodes: fsyncs, log-writer and
// apply batches, Readies, log entries appended, commands per proposed
// entry, Raft messages and the batches (frames) carrying them, the
// process's read and write syscalls (sockets and files) and its voluntary
// context switches (a thread that slept: a futex, a netpoll or a disk
// wait); the log shows entries by commands. They are what each piece's
// isolated cost is multiplied by (docs/benchmarks/cost.md, "The floor of
// the pieces we keep").
func BenchmarkRF3Put(b *testing.B) {
	tc := startClusterWith(b, 3, func(c *Config) { c.InMemory = false })
	c := tc.client()
	tc.waitReplicated(c, 3)
	val := make([]byte, 1000)
	var next atomic.Uint64
	// One slot per write, indexed by its sequence number (b.N in all).
	lat := make([]time.Duration, b.N)
	b.SetParallelism(16) // 32 writers on 2 CPUs
	before := takeWriteCounts(b, tc)
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
	takeWriteCounts(b, tc).since(before).report(b)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100])/float64(time.Microsecond), "p99-µs")
}

// writeCounts are the cluster's and the process's counters that say how
// writes were batched.
type writeCounts struct {
	syncs, logBatches, applyBatches, readies, appended   uint64
	commands, entries, msgs, batches, syscr, syscw, vcsw uint64
}

func takeWriteCounts(b *testing.B, tc *testCluster) writeCounts {
	var w writeCounts
	for _, s := range tc.nodes {
		st := s.Store().Stats()
		w.syncs += st.Syncs.Load()
		w.logBatches += st.LogBatches.Load()
		w.applyBatches += st.ApplyBatches.Load()
		w.readies += st.Readies.Load()
		w.appended += st.EntriesAppended.Load()
		w.commands += st.CommandsProposed.Load()
		w.entries += st.EntriesProposed.Load()
		w.msgs += st.MessagesSent.Load()
		w.batches += s.peers.raft.BatchesSent()
	}
	io, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(io), "\n") {
		name, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseUint(v, 10, 64)
		switch name {
		case "syscr":
			w.syscr = n
		case "syscw":
			w.syscw = n
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	w.vcsw = uint64(ru.Nvcsw)
	return w
}

func (w writeCounts) since(o writeCounts) writeCounts {
	d := writeCounts{syncs: w.syncs - o.syncs, logBatches: w.logBatches - o.logBatches,
		applyBatches: w.applyBatches - o.applyBatches, readies: w.readies - o.readies,
		appended: w.appended - o.appended, commands: w.commands - o.commands, entries: w.entries - o.entries,
		msgs: w.msgs - o.msgs, batches: w.batches - o.batches, syscr: w.syscr - o.syscr,
		syscw: w.syscw - o.syscw, vcsw: w.vcsw - o.vcsw}
	return d
}

func (w writeCounts) report(b *testing.B) {
	per := func(n uint64) float64 { return float64(n) / float64(b.N) }
	b.ReportMetric(per(w.syncs), "fsyncs/op")
	b.ReportMetric(per(w.logBatches), "logbatches/op")
	b.ReportMetric(per(w.applyBatches), "applybatches/op")
	b.ReportMetric(per(w.readies), "readies/op")
	b.ReportMetric(per(w.appended), "appended/op")
	b.ReportMetric(per(w.msgs), "msgs/op")
	b.ReportMetric(per(w.batches), "frames/op")
	b.ReportMetric(per(w.syscr), "syscr/op")
	b.ReportMetric(per(w.syscw), "syscw/op")
	b.ReportMetric(per(w.vcsw), "vcsw/op")
	if w.entries > 0 {
		b.ReportMetric(float64(w.commands)/float64(w.entries), "cmds/entry")
	}
}

// processCPU is the user and system CPU the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
