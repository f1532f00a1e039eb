package retry

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 5 * time.Second} {
		if got := Backoff(n, time.Second, 5*time.Second); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, want)
		}
	}
}
