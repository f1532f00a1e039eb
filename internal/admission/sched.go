package admission

import (
	"runtime/metrics"
	"time"
)

// SchedSampler reads the Go scheduler's run-queue latency (how long
// runnable goroutines waited for a CPU) since its previous sample. When the
// CPU is saturated, requests wait there before any of the node's code sees
// them, so this is the signal that the node's own clock of a request's
// arrival starts too late. Not safe for concurrent use.
type SchedSampler struct {
	sample []metrics.Sample
	prev   []uint64
}

const schedLatencies = "/sched/latencies:seconds"

// NewSchedSampler returns a sampler; its first Sample covers the time since
// the process started.
func NewSchedSampler() *SchedSampler {
	return &SchedSampler{sample: []metrics.Sample{{Name: schedLatencies}}}
}

// Sample returns the median run-queue latency of the goroutines scheduled
// since the previous call (0 if none were).
func (s *SchedSampler) Sample() time.Duration {
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s.sample[0].Value.Float64Histogram()
	if len(s.prev) != len(h.Counts) {
		s.prev = make([]uint64, len(h.Counts))
	}
	delta := make([]uint64, len(h.Counts))
	var total uint64
	for i, n := range h.Counts {
		delta[i] = n - s.prev[i]
		total += delta[i]
		s.prev[i] = n
	}
	return median(delta, total, h.Buckets)
}

// median is the lower bound of the bucket holding the middle count: the
// histogram's buckets are fine enough (about 10% wide) for a threshold.
func median(counts []uint64, total uint64, bounds []float64) time.Duration {
	if total == 0 {
		return 0
	}
	var seen uint64
	for i, n := range counts {
		seen += n
		if 2*seen >= total {
			return time.Duration(max(bounds[i], 0) * float64(time.Second))
		}
	}
	return 0
}
