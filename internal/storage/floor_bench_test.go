package storage_test

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/storage"
)

// BenchmarkPebbleFloor is what one node's Pebble does for replicated
// writes, on its own: each write's Raft log entry (a 1,040-byte command
// under a 19-byte log key, as the log writer stores it) goes into a log
// batch of logBatch entries committed with fsync, and its version (a
// 1,000-byte value under a 21-byte key, keys cycling over 20,000 as
// BenchmarkRF3Put's do) into an apply batch of applyBatch writes with the
// replica's 40-byte state, committed without one, as the log writer and
// the apply stage do. One goroutine commits both, so nothing overlaps the
// fsync: the CPU is the same. Every logTruncate entries the log below
// the last is deleted (one DeleteRange and the state, unsynced), as the
// store truncates a log every replica holds, so a flush drops most of the
// log's entries rather than writing them. cpu-µs/write is the process's CPU
// (getrusage) per write, Pebble's own goroutines (flushes, compactions)
// included; fsyncs/write and flushes/write say what the run amortised.
// BenchmarkRF3Put reports the closed loop's batching to pick the sizes
// against (appended/op, logbatches/op, fsyncs/op, applybatches/op,
// summed over three nodes); a run shorter than a 64 MiB memtable holds
// (about 30,000 writes) flushes nothing, as a BenchmarkRF3Put run of
// 20,000 writes does not, so a long run gives the steady state
// (docs/benchmarks/cost.md, "The floor of the pieces we keep").
//
//	go test -run '^$' -bench PebbleFloor -benchtime 20000x ./internal/storage/
func BenchmarkPebbleFloor(b *testing.B) {
	const logTruncate = 64 // raftstore's logTruncateBatch
	for _, bc := range []struct{ logBatch, applyBatch int }{
		{1, 1},   // no batching at all
		{4, 4},   // a light closed loop
		{14, 20}, // BenchmarkRF3Put's per node at 32 writers
	} {
		b.Run(fmt.Sprintf("log=%d/apply=%d", bc.logBatch, bc.applyBatch), func(b *testing.B) {
			e, err := storage.OpenPebbleEngine(b.TempDir(), storage.DefaultPebbleOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			entry, value, state := make([]byte, 1040), make([]byte, 1000), make([]byte, 40)
			logKey, verKey, stateKey := make([]byte, 19), make([]byte, 21), []byte("\x01range-7-state")
			copy(logKey, "\x01r7L")
			logLo := append([]byte(nil), logKey[:11]...)
			copy(verKey, "rf3-")
			var logB, applyB storage.Batch
			var syncs int
			flushes0 := e.DB().Metrics().Flush.Count
			b.ReportAllocs()
			b.ResetTimer()
			cpu := floorCPU()
			for i := range b.N {
				if logB == nil {
					logB = e.NewBatch()
				}
				binary.BigEndian.PutUint64(logKey[11:], uint64(i))
				if err := logB.Set(logKey, entry); err != nil {
					b.Fatal(err)
				}
				if (i+1)%bc.logBatch == 0 || i == b.N-1 {
					if err := logB.Commit(true); err != nil {
						b.Fatal(err)
					}
					_ = logB.Close()
					logB = nil
					syncs++
				}
				if (i+1)%logTruncate == 0 {
					// The replicas have the entries: the log is truncated
					// below them, as maybeTruncateLogLocked does.
					tb := e.NewBatch()
					if err := tb.DeleteRange(logLo, logKey); err != nil {
						b.Fatal(err)
					}
					if err := tb.Set(stateKey, state); err != nil {
						b.Fatal(err)
					}
					if err := tb.Commit(false); err != nil {
						b.Fatal(err)
					}
					_ = tb.Close()
				}
				if applyB == nil {
					applyB = e.NewBatch()
				}
				copy(verKey[4:], fmt.Appendf(verKey[4:4], "%05d", i%20000))
				binary.BigEndian.PutUint64(verKey[9:], uint64(1<<62-i))
				binary.BigEndian.PutUint32(verKey[17:], uint32(i))
				if err := applyB.Set(verKey, value); err != nil {
					b.Fatal(err)
				}
				if (i+1)%bc.applyBatch == 0 || i == b.N-1 {
					if err := applyB.Set(stateKey, state); err != nil {
						b.Fatal(err)
					}
					if err := applyB.Commit(false); err != nil {
						b.Fatal(err)
					}
					_ = applyB.Close()
					applyB = nil
				}
			}
			b.ReportMetric(float64(floorCPU()-cpu)/float64(b.N)/float64(time.Microsecond), "cpu-µs/write")
			b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/write")
			b.ReportMetric(float64(e.DB().Metrics().Flush.Count-flushes0)/float64(b.N), "flushes/write")
		})
	}
}

func floorCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
