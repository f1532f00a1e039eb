package retry

import "time"

// Backoff is the wait after the n-th failure in a row (n ≥ 1): lo·2^(n−1),
// at most hi.
func Backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}
