package clockwatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

type fakeNode struct {
	trusted []bool
	events  []string
}

func (n *fakeNode) SetClockTrusted(trusted bool, _ string) { n.trusted = append(n.trusted, trusted) }
func (n *fakeNode) Event(kind, format string, args ...any) {
	n.events = append(n.events, kind+": "+fmt.Sprintf(format, args...))
}

type fakeHLC struct{}

func (fakeHLC) Update(t hlc.Timestamp) (hlc.Timestamp, error) { return t, nil }

// Offsets measured from push round trips decide the verdict: two of two
// peers far ahead make the clock untrusted (one event), and narrow
// estimates later make it trusted again (one more event).
func TestCheckFollowsOffsets(t *testing.T) {
	n := &fakeNode{}
	const maxOffset = 100 * time.Millisecond
	w := New(maxOffset, 10*time.Millisecond, n, prometheus.NewRegistry())
	var clock fakeHLC // the answers carry no HLC: only the offsets count here
	now := time.Unix(500, 0)
	push := func(peer uint64, offset time.Duration, at time.Time) {
		// A round trip of 2 ms whose answer says the peer's wall clock was
		// offset from ours at the midpoint.
		sent, received := at, at.Add(2*time.Millisecond)
		resp := &tidekvpb.ClosedTimestampsResponse{UnixNanos: at.Add(time.Millisecond + offset).UnixNano()}
		w.NotePushAnswer(clock, peer, sent, received, at, resp)
	}
	push(2, 500*time.Millisecond, now)
	push(3, 500*time.Millisecond, now)
	w.Check(now)
	if h := w.Health(); h.Trusted || len(n.events) != 1 || n.trusted[len(n.trusted)-1] {
		t.Fatalf("after two far peers: health %+v, events %v, trusted %v; want untrusted once", h, n.events, n.trusted)
	}
	later := now.Add(time.Second) // the far estimates have expired
	push(2, 0, later)
	push(3, 0, later)
	w.Check(later)
	if h := w.Health(); !h.Trusted || len(n.events) != 2 || !n.trusted[len(n.trusted)-1] {
		t.Fatalf("after two near peers: health %+v, events %v; want trusted again", h, n.events)
	}
	if got := MaxOffsetMs(hlc.ClockHealth{Offsets: map[uint64]hlc.Offset{2: {Offset: -3 * time.Millisecond}, 3: {Offset: time.Millisecond}}}); got != -3 {
		t.Errorf("MaxOffsetMs = %v, want -3 (the estimate furthest from 0, signed)", got)
	}
}
