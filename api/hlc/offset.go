package hlc

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Offset is an estimate of a peer's physical clock against this node's: the
// peer's clock reads Offset ahead (behind when negative), give or take
// Uncertainty.
type Offset struct {
	Offset, Uncertainty time.Duration
	// MeasuredAt is when the estimate was made, on the monitor's clock
	// (only its age matters).
	MeasuredAt time.Time
}

// MeasureOffset estimates a peer's offset from one round trip, as
// CockroachDB's RemoteClockMonitor does: sent and received are this node's
// physical clock (Unix nanoseconds) around the exchange, remote the peer's
// while it answered, which it did at some point in between. So the offset
// is remote minus the midpoint, give or take half the round trip. ok is
// false when the local clock stepped back during the exchange.
func MeasureOffset(sent, remote, received int64) (offset, uncertainty time.Duration, ok bool) {
	if received < sent {
		return 0, 0, false
	}
	half := (received - sent) / 2
	return time.Duration(remote - (sent + half)), time.Duration(half), true
}

// OffsetMonitor keeps the best recent offset estimate per peer and judges
// whether this node's clock can be trusted. It is safe for concurrent use.
type OffsetMonitor struct {
	maxOffset, ttl time.Duration

	mu    sync.Mutex
	peers map[uint64]Offset
}

// NewOffsetMonitor returns a monitor for a cluster whose clocks must agree
// within maxOffset; an estimate counts for ttl after it was made.
func NewOffsetMonitor(maxOffset, ttl time.Duration) *OffsetMonitor {
	return &OffsetMonitor{maxOffset: maxOffset, ttl: ttl, peers: map[uint64]Offset{}}
}

// Tolerance is how far this node's clock may be from a peer's before the
// peer counts against it: 0.8 × the maximum offset, the margin standing
// for the error of the estimates themselves.
func (m *OffsetMonitor) Tolerance() time.Duration { return m.maxOffset / 5 * 4 }

// Record keeps o as the peer's estimate when it is no less certain than
// the one kept, or that one has aged past the ttl: a round trip delayed in
// a queue gives a wide estimate that should not replace a narrow one.
func (m *OffsetMonitor) Record(peer uint64, o Offset) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.peers[peer]; !ok || o.Uncertainty <= cur.Uncertainty || o.MeasuredAt.Sub(cur.MeasuredAt) > m.ttl {
		m.peers[peer] = o
	}
}

// Reset drops every estimate: this node's clock stepped, and they compare
// the clock it had.
func (m *OffsetMonitor) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.peers)
}

// ClockHealth is the monitor's judgement of this node's clock.
type ClockHealth struct {
	// Trusted is false when the clock is beyond the tolerance from a
	// majority of the peers with a recent estimate. With none it is true:
	// there is no evidence against it.
	Trusted bool
	// Far of Known peers are certainly beyond the tolerance.
	Far, Known int
	// Reason says why the clock is not trusted, in one sentence; empty
	// when it is.
	Reason string
	// Offsets are the recent estimates by peer.
	Offsets map[uint64]Offset
}

// Health judges the clock at now, dropping estimates older than the ttl.
// A peer counts as far only when even the nearest offset its estimate
// allows, |Offset| − Uncertainty, exceeds the tolerance.
func (m *OffsetMonitor) Health(now time.Time) ClockHealth {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := ClockHealth{Offsets: map[uint64]Offset{}}
	var far []uint64
	for peer, o := range m.peers {
		if now.Sub(o.MeasuredAt) > m.ttl {
			delete(m.peers, peer)
			continue
		}
		h.Offsets[peer] = o
		if abs(o.Offset)-o.Uncertainty > m.Tolerance() {
			far = append(far, peer)
		}
	}
	h.Known, h.Far = len(h.Offsets), len(far)
	h.Trusted = h.Far*2 <= h.Known
	if !h.Trusted {
		slices.Sort(far)
		parts := make([]string, len(far))
		for i, p := range far {
			o := h.Offsets[p]
			parts[i] = fmt.Sprintf("node %d %+v ±%v", p, o.Offset.Round(time.Millisecond), o.Uncertainty.Round(time.Millisecond))
		}
		h.Reason = fmt.Sprintf("clock is more than %v (0.8 × max offset %v) from %d of %d peers (%s)",
			m.Tolerance(), m.maxOffset, h.Far, h.Known, strings.Join(parts, ", "))
	}
	return h
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
