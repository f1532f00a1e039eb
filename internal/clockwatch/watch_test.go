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

// The node that answers an exchange has no round trip of its own: the
// initiator sends, once, the estimate it measured from the answer, and the
// responder takes it negated, as old as it is. Node 1's clock reads 300 ms
// behind node 2's: node 1 measures +300 ms, node 2 records -300 ms for
// node 1. An estimate measured before a step of the responder's wall
// clock, or older than an estimate counts for, is dropped.
func TestResponderTakesTheEstimateNegated(t *testing.T) {
	const maxOffset = 100 * time.Millisecond
	at := time.Unix(500, 0)
	wall1, wall2 := &fakeWall{now: at}, &fakeWall{now: at.Add(300 * time.Millisecond)}
	w1 := New(maxOffset, 10*time.Millisecond, wall1, &fakeNode{}, prometheus.NewRegistry())
	w2 := New(maxOffset, 10*time.Millisecond, wall2, &fakeNode{}, prometheus.NewRegistry())
	// exchange is node 1's round trip to node 2 of 2 ms begun at at, and
	// the estimate node 1 sends in its next exchange, sent at.
	exchange := func(at time.Time, sent time.Duration) *tidekvpb.OffsetEstimate {
		wall1.now, wall2.now = at, at.Add(300*time.Millisecond+time.Millisecond)
		s := w1.Begin()
		resp := &tidekvpb.ClosedTimestampsResponse{UnixNanos: w2.Answer(1).UnixNano()}
		wall1.now = at.Add(2 * time.Millisecond)
		if err := w1.NotePushAnswer(fakeHLC{}, 2, s, at, resp); err != nil {
			t.Fatal(err)
		}
		return w1.Estimate(2, at.Add(sent))
	}
	est := exchange(at, 10*time.Millisecond)
	if est.GetOffsetNanos() != int64(300*time.Millisecond) || est.GetUncertaintyNanos() != int64(time.Millisecond) || est.GetAgeNanos() != int64(10*time.Millisecond) {
		t.Fatalf("estimate %v, want +300 ms ± 1 ms, 10 ms old", est)
	}
	if again := w1.Estimate(2, at.Add(10*time.Millisecond)); again != nil {
		t.Fatalf("estimate sent twice: %v", again)
	}
	now := at.Add(10 * time.Millisecond)
	w2.NoteEstimate(1, est, now)
	w2.Check(now)
	if o := w2.Health().Offsets[1]; o.Offset != -300*time.Millisecond || o.Uncertainty != time.Millisecond || !o.MeasuredAt.Equal(at) {
		t.Fatalf("node 2's estimate of node 1 %+v, want -300 ms ± 1 ms measured at %v", o, at)
	}
	if h := w2.Health(); h.Trusted {
		t.Fatalf("node 2 health %+v: one peer 300 ms away of one, want untrusted", h)
	}

	// The responder's wall clock steps after its answer, and its watch
	// drops the estimates measured before (Check): the estimate arriving
	// after is dropped too.
	later := at.Add(time.Second)
	est = exchange(later, 0)
	wall2.step(time.Second)
	w2.Check(later)
	w2.NoteEstimate(1, est, later)
	w2.Check(later)
	if h := w2.Health(); h.Known != 0 {
		t.Fatalf("after a step: node 2 health %+v, want no estimate", h)
	}

	// An estimate older than it counts for (10 intervals) is not sent.
	if est := exchange(later.Add(time.Second), 101*time.Millisecond); est != nil {
		t.Fatalf("estimate %v, want none: older than 100 ms", est)
	}
}
