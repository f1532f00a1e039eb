package raftstore

import (
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// snapshotBurst is how many snapshot bytes may go out at once under
// Config.SnapshotBytesPerSecond: one transport chunk.
const snapshotBurst = 1 << 20

// tokenBucket meters bytes to a steady rate with bursts of up to burst
// bytes. A caller reserves the bytes it is about to send and waits for the
// delay reserve returns. The balance may go negative (bytes reserved ahead
// of the refill), so concurrent callers queue behind each other in arrival
// order and together never exceed the rate: over any interval of length d,
// at most burst + rate·d bytes are released.
type tokenBucket struct {
	rate  float64 // bytes per second, > 0
	burst float64
	now   func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// newTokenBucket returns a full bucket.
func newTokenBucket(rate, burst int64, now func() time.Time) *tokenBucket {
	return &tokenBucket{rate: float64(rate), burst: float64(burst), now: now, tokens: float64(burst), last: now()}
}

// setRate changes the refill rate from now on (bytes/s, > 0): the
// migration-bandwidth controller adjusts it while snapshots stream.
func (b *tokenBucket) setRate(rate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el.Seconds()*b.rate)
		b.last = now
	}
	b.rate = rate
}

// currentRate is the refill rate in bytes/s.
func (b *tokenBucket) currentRate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}

// reserve takes n bytes from the bucket and returns how long the caller
// must wait before sending them (0: at once).
func (b *tokenBucket) reserve(n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el.Seconds()*b.rate)
		b.last = now
	}
	b.tokens -= float64(n)
	if b.tokens >= 0 {
		return 0
	}
	// Round up: waiting a nanosecond too long is harmless, too short is not.
	return time.Duration(math.Ceil(-b.tokens / b.rate * float64(time.Second)))
}

// throttledReader passes reads through a token bucket, at most max bytes
// per read, waiting (through wait) before returning bytes the bucket has no
// tokens for yet. The time waited is kept in waited and added to total.
type throttledReader struct {
	r      io.Reader
	tb     *tokenBucket
	max    int
	wait   func(time.Duration) error
	now    func() time.Time
	total  *atomic.Uint64
	waited time.Duration
}

func (t *throttledReader) Read(p []byte) (int, error) {
	if len(p) > t.max {
		p = p[:t.max]
	}
	n, err := t.r.Read(p)
	if n > 0 {
		if d := t.tb.reserve(n); d > 0 {
			start := t.now()
			werr := t.wait(d)
			w := t.now().Sub(start)
			t.waited += w
			t.total.Add(uint64(w))
			if werr != nil {
				return 0, werr
			}
		}
	}
	return n, err
}
