package hlc

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

var epoch = time.Unix(1_700_000_000, 0)

func newTestClock(t *testing.T, maxOffset time.Duration) (*Clock, *manualclock.Clock) {
	t.Helper()
	phys := manualclock.New(epoch)
	c, err := NewClock(phys, maxOffset)
	if err != nil {
		t.Fatal(err)
	}
	return c, phys
}

func ts(wall int64, logical uint32) Timestamp { return Timestamp{WallTime: wall, Logical: logical} }

func TestNowFollowsThePhysicalClock(t *testing.T) {
	c, phys := newTestClock(t, 500*time.Millisecond)
	if got, want := c.Now(), ts(epoch.UnixNano(), 0); got != want {
		t.Fatalf("first Now = %s, want %s", got, want)
	}
	// Same physical time: the logical counter orders the events.
	if got, want := c.Now(), ts(epoch.UnixNano(), 1); got != want {
		t.Fatalf("second Now = %s, want %s", got, want)
	}
	phys.Advance(time.Millisecond)
	if got, want := c.Now(), ts(epoch.Add(time.Millisecond).UnixNano(), 0); got != want {
		t.Fatalf("after the clock moved, Now = %s, want %s", got, want)
	}
}

func TestNowIsMonotonicWhenThePhysicalClockStepsBack(t *testing.T) {
	c, phys := newTestClock(t, 500*time.Millisecond)
	phys.Advance(time.Hour)
	high := c.Now()
	phys.Set(epoch) // an hour back: NTP, an operator, a VM resume
	prev := high
	for i := range 1000 {
		if i%100 == 0 {
			phys.Advance(time.Millisecond) // moving again, still below high
		}
		got := c.Now()
		if !prev.Less(got) {
			t.Fatalf("Now went from %s to %s after the clock stepped back", prev, got)
		}
		if got.WallTime != high.WallTime {
			t.Fatalf("Now = %s: wall time left %d while the physical clock is behind it", got, high.WallTime)
		}
		prev = got
	}
	// Once physical time passes the high mark, it is used again.
	phys.Set(epoch.Add(time.Hour + time.Second))
	if got, want := c.Now(), ts(epoch.Add(time.Hour+time.Second).UnixNano(), 0); got != want {
		t.Fatalf("after physical time caught up, Now = %s, want %s", got, want)
	}
}

func TestLogicalOverflowMovesTheWallTime(t *testing.T) {
	c, _ := newTestClock(t, 500*time.Millisecond)
	full := ts(epoch.UnixNano(), math.MaxUint32)
	got, err := c.Update(full)
	if err != nil {
		t.Fatal(err)
	}
	if want := ts(epoch.UnixNano()+1, 0); got != want {
		t.Fatalf("Update(%s) = %s, want %s (the counter must not wrap)", full, got, want)
	}
	if next := c.Now(); !got.Less(next) {
		t.Fatalf("Now after the overflow = %s, not after %s", next, got)
	}
	if got, want := full.Next(), ts(epoch.UnixNano()+1, 0); got != want {
		t.Fatalf("Next of a full counter = %s, want %s", got, want)
	}
}

func TestUpdateOrdersAfterTheRemote(t *testing.T) {
	c, _ := newTestClock(t, 500*time.Millisecond)
	local := c.Now()
	cases := []struct {
		name   string
		remote Timestamp
		want   Timestamp
	}{
		{"behind", ts(local.WallTime-int64(time.Second), 7), local.Next()},
		{"same wall, higher logical", ts(local.WallTime, 9), ts(local.WallTime, 10)},
		{"ahead within the offset", ts(local.WallTime+int64(400*time.Millisecond), 3), ts(local.WallTime+int64(400*time.Millisecond), 4)},
	}
	for _, tc := range cases {
		got, err := c.Update(tc.remote)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Fatalf("%s: Update(%s) = %s, want %s", tc.name, tc.remote, got, tc.want)
		}
		if !tc.remote.Less(got) {
			t.Fatalf("%s: Update(%s) = %s, not after the remote", tc.name, tc.remote, got)
		}
		if now := c.Now(); !got.Less(now) {
			t.Fatalf("%s: Now after Update = %s, not after %s", tc.name, now, got)
		}
	}
}

func TestUpdateRefusesARemoteBeyondTheMaxOffset(t *testing.T) {
	c, phys := newTestClock(t, 500*time.Millisecond)
	before := c.Now()
	far := ts(epoch.Add(600*time.Millisecond).UnixNano(), 0)
	_, err := c.Update(far)
	if !errors.Is(err, ErrClockOffset) {
		t.Fatalf("Update 600ms ahead with a 500ms bound: err = %v, want ErrClockOffset", err)
	}
	for _, part := range []string{far.String(), "600ms ahead", "maximum offset 500ms"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
	// Refused means not adopted.
	if got := c.Now(); got != before.Next() {
		t.Fatalf("Now after a refused Update = %s, want %s", got, before.Next())
	}
	// At exactly the bound it is accepted, and once the local clock moves
	// the same timestamp is within it.
	if _, err := c.Update(ts(epoch.Add(500*time.Millisecond).UnixNano(), 0)); err != nil {
		t.Fatalf("Update at exactly the bound: %v", err)
	}
	phys.Advance(200 * time.Millisecond)
	if got, err := c.Update(far); err != nil || !far.Less(got) {
		t.Fatalf("Update(%s) after the clock moved = %s, %v; want after it", far, got, err)
	}
	// Extremes do not overflow the check.
	if _, err := c.Update(MaxTimestamp); !errors.Is(err, ErrClockOffset) {
		t.Fatalf("Update(MaxTimestamp): err = %v, want ErrClockOffset", err)
	}
	phys.Set(time.Unix(0, math.MinInt64))
	if _, err := c.Update(MaxTimestamp); !errors.Is(err, ErrClockOffset) {
		t.Fatalf("Update(MaxTimestamp) from the earliest physical time: err = %v, want ErrClockOffset", err)
	}
}

func TestNewClockConfig(t *testing.T) {
	if c, _ := newTestClock(t, 250*time.Millisecond); c.MaxOffset() != 250*time.Millisecond {
		t.Fatalf("MaxOffset = %v, want the 250ms it was created with", c.MaxOffset())
	}
	if _, err := NewClock(manualclock.New(time.Time{}), 0); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Fatalf("NewClock with a zero offset: err = %v", err)
	}
	if _, err := NewClock(nil, time.Second); err == nil {
		t.Fatal("NewClock without a physical clock: no error")
	}
}

// Concurrent callers never see the same timestamp twice, and each sees its
// own readings increase, while the physical clock jumps about.
func TestConcurrentNowIsUnique(t *testing.T) {
	c, phys := newTestClock(t, 500*time.Millisecond)
	const goroutines, each = 4, 2000
	out := make([][]Timestamp, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if g == 0 && i%50 == 0 {
					phys.Advance(time.Duration(i%7-3) * time.Millisecond)
				}
				out[g] = append(out[g], c.Now())
			}
		})
	}
	wg.Wait()
	seen := map[Timestamp]bool{}
	for g, tss := range out {
		for i, t1 := range tss {
			if seen[t1] {
				t.Fatalf("timestamp %s handed out twice", t1)
			}
			seen[t1] = true
			if i > 0 && !tss[i-1].Less(t1) {
				t.Fatalf("goroutine %d saw %s then %s", g, tss[i-1], t1)
			}
		}
	}
}
