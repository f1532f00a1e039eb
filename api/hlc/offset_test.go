package hlc

import (
	"strings"
	"testing"
	"time"
)

func TestMeasureOffset(t *testing.T) {
	const ms = int64(time.Millisecond)
	// Sent at 1000 ms, answered by a peer reading 1305 ms, back at 1010 ms:
	// the peer is 300 ms ahead of the midpoint, give or take 5 ms.
	off, unc, ok := MeasureOffset(1000*ms, 1305*ms, 1010*ms)
	if !ok || off != 300*time.Millisecond || unc != 5*time.Millisecond {
		t.Fatalf("got %v ±%v ok=%v, want 300ms ±5ms", off, unc, ok)
	}
	if _, _, ok := MeasureOffset(1000*ms, 1000*ms, 999*ms); ok {
		t.Fatal("a round trip that ends before it starts (the local clock stepped back) gave an estimate")
	}
}

func TestOffsetMonitorKeepsTheBestRecentEstimate(t *testing.T) {
	m := NewOffsetMonitor(250*time.Millisecond, time.Second)
	m.Record(2, Offset{Offset: 10 * time.Millisecond, Uncertainty: time.Millisecond, MeasuredAt: epoch})
	// A wider estimate within the ttl does not replace a narrower one ...
	m.Record(2, Offset{Offset: 400 * time.Millisecond, Uncertainty: 50 * time.Millisecond, MeasuredAt: epoch.Add(500 * time.Millisecond)})
	if got := m.Health(epoch.Add(600 * time.Millisecond)).Offsets[2].Offset; got != 10*time.Millisecond {
		t.Fatalf("offset %v, want the narrower 10ms kept", got)
	}
	// ... but does once that one has aged past it.
	m.Record(2, Offset{Offset: 400 * time.Millisecond, Uncertainty: 50 * time.Millisecond, MeasuredAt: epoch.Add(1500 * time.Millisecond)})
	if got := m.Health(epoch.Add(1600 * time.Millisecond)).Offsets[2].Offset; got != 400*time.Millisecond {
		t.Fatalf("offset %v, want 400ms after the old estimate aged out", got)
	}
	// Estimates older than the ttl are dropped.
	if h := m.Health(epoch.Add(3 * time.Second)); h.Known != 0 || !h.Trusted {
		t.Fatalf("health %+v, want no peers known and trusted", h)
	}
}

func TestOffsetMonitorHealth(t *testing.T) {
	at := func(d time.Duration, unc time.Duration) Offset {
		return Offset{Offset: d, Uncertainty: unc, MeasuredAt: epoch}
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		offsets map[uint64]Offset
		trusted bool
	}{
		{"no peers", nil, true},
		{"within the tolerance", map[uint64]Offset{2: at(190*ms, ms), 3: at(-190*ms, ms)}, true},
		{"one of two far", map[uint64]Offset{2: at(300*ms, ms), 3: at(5*ms, ms)}, true},
		{"two of two far, either side", map[uint64]Offset{2: at(300*ms, ms), 3: at(-300*ms, ms)}, false},
		{"far only within the uncertainty", map[uint64]Offset{2: at(230*ms, 40*ms), 3: at(230*ms, 40*ms)}, true},
		{"two of three far", map[uint64]Offset{2: at(-260*ms, ms), 3: at(-260*ms, ms), 4: at(0, ms)}, false},
		{"the lone peer far", map[uint64]Offset{2: at(260*ms, ms)}, false},
	} {
		m := NewOffsetMonitor(250*time.Millisecond, time.Second)
		for p, o := range tc.offsets {
			m.Record(p, o)
		}
		h := m.Health(epoch)
		if h.Trusted != tc.trusted {
			t.Errorf("%s: trusted=%v, want %v (%+v)", tc.name, h.Trusted, tc.trusted, h)
		}
		if h.Trusted != (h.Reason == "") {
			t.Errorf("%s: reason %q with trusted=%v", tc.name, h.Reason, h.Trusted)
		}
		if !h.Trusted && !strings.Contains(h.Reason, "more than 200ms") {
			t.Errorf("%s: reason %q does not name the tolerance", tc.name, h.Reason)
		}
	}
}
