package clockwatch

import (
	"fmt"
	"slices"
	"strings"
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

// fakeWall is a wall clock the test sets, with the steps it says it made.
type fakeWall struct {
	now      time.Time
	steps    uint64
	pending  time.Duration
	followed int
}

func (w *fakeWall) WallNow() time.Time     { return w.now }
func (w *fakeWall) Steps() uint64          { return w.steps }
func (w *fakeWall) Pending() time.Duration { return w.pending }
func (w *fakeWall) Follow()                { w.followed++; w.pending = 0 }

// step moves the wall clock by d, a step not followed yet.
func (w *fakeWall) step(d time.Duration) {
	w.now = w.now.Add(d)
	w.steps++
	w.pending += d
}

type fakeHLC struct{}

func (fakeHLC) Update(t hlc.Timestamp) (hlc.Timestamp, error) { return t, nil }

// Offsets measured from push round trips decide the verdict: two of two
// peers far ahead make the clock untrusted (one event), and narrow
// estimates later make it trusted again (one more event).
func TestCheckFollowsOffsets(t *testing.T) {
	n := &fakeNode{}
	const maxOffset = 100 * time.Millisecond
	wall := &fakeWall{}
	w := New(maxOffset, 10*time.Millisecond, wall, n, prometheus.NewRegistry())
	now := time.Unix(500, 0)
	push := func(peer uint64, offset time.Duration, at time.Time) {
		pushAt(w, wall, peer, offset, at)
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

// pushAt makes a round trip of 2 ms to peer beginning at wall time at,
// whose answer says the peer's wall clock was offset from ours at the
// midpoint. The answers carry no HLC: only the offsets count here.
func pushAt(w *Watch, wall *fakeWall, peer uint64, offset time.Duration, at time.Time) {
	wall.now = at
	s := w.Begin()
	wall.now = at.Add(2 * time.Millisecond)
	resp := &tidekvpb.ClosedTimestampsResponse{UnixNanos: at.Add(time.Millisecond + offset).UnixNano()}
	w.NotePushAnswer(fakeHLC{}, peer, s, at, resp)
}

// A step of the wall clock drops the estimates measured before it (they
// compare a clock that is gone) and the round trips across it; the node's
// time follows the step only once estimates measured since find the
// stepped clock near the peers'.
func TestStepFollowedOnlyWhenPeersAgree(t *testing.T) {
	n := &fakeNode{}
	const maxOffset = 100 * time.Millisecond
	wall := &fakeWall{now: time.Unix(500, 0)}
	w := New(maxOffset, 10*time.Millisecond, wall, n, prometheus.NewRegistry())
	at := wall.now
	pushAt(w, wall, 2, 0, at)
	pushAt(w, wall, 3, 0, at)
	w.Check(at)
	if h := w.Health(); !h.Trusted || h.Known != 2 {
		t.Fatalf("before the step: health %+v, want trusted by 2 peers", h)
	}

	// This node's wall clock jumps 570 ms ahead: the peers now read 570 ms
	// behind it. A round trip begun before the step and answered after
	// measures nothing.
	wall.now = at.Add(5 * time.Millisecond)
	s := w.Begin()
	wall.step(570 * time.Millisecond)
	w.NotePushAnswer(fakeHLC{}, 2, s, at, &tidekvpb.ClosedTimestampsResponse{UnixNanos: at.Add(6 * time.Millisecond).UnixNano()})
	w.Check(at.Add(10 * time.Millisecond))
	if h := w.Health(); !h.Trusted || h.Known != 0 || wall.followed != 0 {
		t.Fatalf("right after the step: health %+v, followed %d; want the old estimates and the straddling one dropped, the step not followed", h, wall.followed)
	}
	if len(n.events) != 1 || !strings.HasPrefix(n.events[0], "clock-step:") {
		t.Fatalf("events %v, want one clock-step event", n.events)
	}
	after := wall.now
	pushAt(w, wall, 2, -570*time.Millisecond, after)
	pushAt(w, wall, 3, -570*time.Millisecond, after)
	w.Check(after)
	if h := w.Health(); h.Trusted || wall.followed != 0 {
		t.Fatalf("peers 570 ms behind the stepped clock: health %+v, followed %d; want untrusted, not followed", h, wall.followed)
	}

	// The peers' clocks step too (every clock moved together): the step is
	// followed, once.
	later := after.Add(2 * time.Second)
	pushAt(w, wall, 2, 0, later)
	pushAt(w, wall, 3, 0, later)
	w.Check(later)
	w.Check(later)
	if h := w.Health(); !h.Trusted || wall.followed != 1 || wall.pending != 0 {
		t.Fatalf("peers agreeing with the stepped clock: health %+v, followed %d; want trusted and the step followed once", h, wall.followed)
	}
	if !slices.ContainsFunc(n.events, func(e string) bool { return strings.HasPrefix(e, "clock-step-followed:") }) {
		t.Fatalf("events %v, want a clock-step-followed", n.events)
	}
}
