package monitor

import (
	"sync"
	"testing"
	"time"
)

func TestServiceTimer(t *testing.T) {
	var st ServiceTimer
	if st.Mean() != 0 {
		t.Fatalf("zero value Mean = %v", st.Mean())
	}
	st.Observe(8 * time.Millisecond)
	if st.Mean() != 8*time.Millisecond {
		t.Fatalf("first observation: Mean = %v, want 8ms", st.Mean())
	}
	st.Observe(24 * time.Millisecond)
	if want := 9 * time.Millisecond; st.Mean() != want { // 8 + (24-8)/16
		t.Fatalf("second observation: Mean = %v, want %v", st.Mean(), want)
	}
	for range 200 {
		st.Observe(time.Millisecond)
	}
	if m := st.Mean(); m < time.Millisecond || m > time.Millisecond+time.Microsecond {
		t.Fatalf("after 200 × 1ms: Mean = %v", m)
	}
	var z ServiceTimer
	z.Observe(-time.Second)
	if z.Mean() != 1 {
		t.Fatalf("non-positive observation: Mean = %v, want 1ns", z.Mean())
	}
}

// Concurrent observers of one value must leave exactly that value: no lost
// or torn updates (run with -race too).
func TestServiceTimerConcurrent(t *testing.T) {
	var st ServiceTimer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10000 {
				st.Observe(3 * time.Millisecond)
				_ = st.Mean()
			}
		}()
	}
	wg.Wait()
	if st.Mean() != 3*time.Millisecond {
		t.Fatalf("Mean = %v, want 3ms", st.Mean())
	}
}

func BenchmarkServiceTimerObserve(b *testing.B) {
	var st ServiceTimer
	d := 250 * time.Microsecond
	for b.Loop() {
		st.Observe(d)
	}
}

func BenchmarkServiceTimerObserveParallel(b *testing.B) {
	var st ServiceTimer
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			st.Observe(250 * time.Microsecond)
		}
	})
}

func BenchmarkServiceTimerMean(b *testing.B) {
	var st ServiceTimer
	st.Observe(time.Millisecond)
	var sink time.Duration
	for b.Loop() {
		sink += st.Mean()
	}
	_ = sink
}

// A node served nothing since the last sample: its mean halves each sample
// until a request is served again, so a node clients left for its high
// mean becomes cheap enough to be tried again.
func TestServiceTimerSampleDecaysWhenIdle(t *testing.T) {
	var st ServiceTimer
	if got := st.Sample(); got != 0 {
		t.Fatalf("no observation: %v, want 0", got)
	}
	st.Observe(80 * time.Millisecond)
	if got := st.Sample(); got != 80*time.Millisecond {
		t.Fatalf("served since the last sample: %v, want the mean, 80ms", got)
	}
	for _, want := range []time.Duration{40 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond} {
		if got := st.Sample(); got != want {
			t.Fatalf("idle sample: %v, want %v", got, want)
		}
	}
	st.Observe(10 * time.Millisecond)
	if got := st.Sample(); got != 10*time.Millisecond {
		t.Fatalf("served again: %v, want the mean moved by the observation, 10ms", got)
	}
}
