package transport

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
)

// The floors under a replicated write that are neither Raft's nor
// Pebble's: a frame over loopback TCP, and a goroutine hand-off. Both
// ends run in this process, so cpu-µs counts the sender's and the
// receiver's work together (getrusage), and vcsw the voluntary context
// switches (an OS thread that slept: in a futex or in epoll_wait).
// BenchmarkRF3Put counts how many of each a write takes (frames/op,
// syscr/op, syscw/op, vcsw/op; docs/benchmarks/cost.md, "The floor of the
// pieces we keep").

// BenchmarkLoopbackFrame sends one frame of size bytes over a loopback TCP
// connection and answers it with one of the same size, one at a time (a
// replica's append and its acknowledgement, a client's request and its
// answer): per frame, one write(2), the receiver's netpoll wake-up and
// one read(2), no framing or encoding beyond the bytes. cpu-µs/frame.
//
//	go test -run '^$' -bench LoopbackFrame -benchtime 50000x -count 3 ./internal/transport/
func BenchmarkLoopbackFrame(b *testing.B) {
	for _, size := range []int{64, 1100, 16 << 10} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			c := loopbackConn(b, func(c net.Conn) {
				buf := make([]byte, size)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			})
			buf := make([]byte, size)
			b.ReportAllocs()
			b.ResetTimer()
			cpu, vcsw := floorUsage()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
			cpu2, vcsw2 := floorUsage()
			b.ReportMetric(float64(cpu2-cpu)/1e3/float64(2*b.N), "cpu-µs/frame")
			b.ReportMetric(float64(vcsw2-vcsw)/float64(2*b.N), "vcsw/frame")
		})
	}
}

// BenchmarkGoroutineHandoff passes a token between two goroutines on
// unbuffered channels, each waiting for it in turn: one hand-off is one
// goroutine readied by another and run. "goroutines": the runtime may run
// both on one P, without a thread sleeping; "threads": each goroutine is
// locked to its own OS thread, so every hand-off wakes a sleeping thread
// (a futex wake and sleep), as when the goroutine woken has no running
// thread to take it. cpu-µs/handoff.
//
//	go test -run '^$' -bench GoroutineHandoff -benchtime 200000x -count 3 ./internal/transport/
func BenchmarkGoroutineHandoff(b *testing.B) {
	for _, mode := range []string{"goroutines", "threads"} {
		b.Run(mode, func(b *testing.B) {
			ping, pong := make(chan struct{}), make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				if mode == "threads" {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
				}
				for range ping {
					pong <- struct{}{}
				}
			}()
			if mode == "threads" {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			b.ResetTimer()
			cpu, vcsw := floorUsage()
			for range b.N {
				ping <- struct{}{}
				<-pong
			}
			cpu2, vcsw2 := floorUsage()
			close(ping)
			<-done
			b.ReportMetric(float64(cpu2-cpu)/1e3/float64(2*b.N), "cpu-µs/handoff")
			b.ReportMetric(float64(vcsw2-vcsw)/float64(2*b.N), "vcsw/handoff")
		})
	}
}

// floorUsage is the process's user and system CPU in nanoseconds and its
// voluntary context switches.
func floorUsage() (cpuNanos, vcsw int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano(), ru.Nvcsw
}
