package bench

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// The per-second timeline of a phase. Each worker counts the second it is
// in and hands it over when its operations cross into the next one, so the
// shared lock is taken about once a second per worker. Latencies go into a
// coarse log-linear histogram (16 buckets per power of two, 6% precision)
// small enough to keep one per second of an hour-long run.
const (
	tlSubBits = 4
	tlBuckets = (histMaxBits - tlSubBits + 1) << tlSubBits
)

// TimelinePoint is one second of a phase.
type TimelinePoint struct {
	// Second is the interval's end in seconds since the phase started:
	// the point covers (Second-1, Second].
	Second int `json:"s"`
	// Ops counts operations that completed in the interval, failed ones
	// included; Errors the failed ones.
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
	// OpsPerSec is Ops over the interval's length (the last one is
	// usually shorter than a second).
	OpsPerSec float64 `json:"ops_per_sec"`
	// P99Ms is over the interval's successful operations; 0 when none
	// succeeded.
	P99Ms float64 `json:"p99_ms"`
}

type secStats struct {
	ops, errs int64
	n         uint32
	counts    [tlBuckets]uint32
}

func (s *secStats) record(lat time.Duration, failed bool) {
	s.ops++
	if failed {
		s.errs++
		return
	}
	v := min(uint64(max(lat, 0)), histMax)
	shift := max(bits.Len64(v)-tlSubBits-1, 0)
	s.counts[shift<<tlSubBits+int(v>>shift)]++
	s.n++
}

// p99 is the upper bound of the bucket holding the 99th percentile, in ms.
func (s *secStats) p99() float64 {
	if s.n == 0 {
		return 0
	}
	rank := uint32(math.Ceil(0.99*float64(s.n) - 1e-9))
	var seen uint32
	for i, c := range s.counts {
		if seen += c; seen >= max(rank, 1) {
			shift := max(i>>tlSubBits-1, 0)
			hi := uint64(i-shift<<tlSubBits)<<shift + 1<<shift - 1
			return float64(hi) / 1e6
		}
	}
	return 0
}

// timeline collects a phase's seconds from its workers.
type timeline struct {
	begin time.Time
	mu    sync.Mutex
	secs  []*secStats // index i: second i+1
}

// add records one operation that ended at end into w's current second,
// handing the previous one over if end is past it.
func (t *timeline) add(w *worker, end time.Time, lat time.Duration, failed bool) {
	sec := int(end.Sub(t.begin) / time.Second)
	if sec != w.sec {
		t.flush(w)
		w.sec = sec
	}
	w.cur.record(lat, failed)
}

// flush merges w's current second into the timeline and clears it.
func (t *timeline) flush(w *worker) {
	if w.cur.ops == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.secs) <= w.sec {
		t.secs = append(t.secs, nil)
	}
	s := t.secs[w.sec]
	if s == nil {
		s = new(secStats)
		t.secs[w.sec] = s
	}
	s.ops += w.cur.ops
	s.errs += w.cur.errs
	s.n += w.cur.n
	for i, c := range w.cur.counts {
		s.counts[i] += c
	}
	w.cur = secStats{}
}

// points is the timeline of a phase that lasted elapsed; seconds without
// a completed operation are there with zero operations.
func (t *timeline) points(elapsed time.Duration) []TimelinePoint {
	n := max(int(math.Ceil(elapsed.Seconds())), len(t.secs))
	out := make([]TimelinePoint, n)
	for i := range out {
		p := TimelinePoint{Second: i + 1}
		length := min(elapsed.Seconds()-float64(i), 1)
		if i < len(t.secs) && t.secs[i] != nil {
			s := t.secs[i]
			p.Ops, p.Errors, p.P99Ms = s.ops, s.errs, s.p99()
		}
		if length > 0 {
			p.OpsPerSec = float64(p.Ops) / length
		}
		out[i] = p
	}
	return out
}
