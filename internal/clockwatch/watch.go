package clockwatch

import (
	"log"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// offsetTTLIntervals is how many push intervals an offset estimate counts
// for: long enough to keep a narrow one over a few delayed round trips,
// short enough that a clock that jumps is noticed within a second.
const offsetTTLIntervals = 10

// HLC is the node's hybrid logical clock as the watch folds remote
// timestamps into it.
type HLC interface {
	Update(hlc.Timestamp) (hlc.Timestamp, error)
}

// Wall is the node's wall clock as the watch sees it (raftstore's
// SteadyClock): what the offset estimates measure, and the guard that
// keeps the node's time from following a step of it until the peers'
// clocks agree with the stepped one.
type Wall interface {
	// WallNow reads the wall clock, stepped or not.
	WallNow() time.Time
	// Steps counts the wall clock's steps so far.
	Steps() uint64
	// Pending is the step the node's time has not followed, 0 if none.
	Pending() time.Duration
	// Follow makes the node's time the wall clock again.
	Follow()
}

// Node is what the watch does to the node when its verdict changes.
type Node interface {
	// SetClockTrusted stops (false) or resumes the holding of leases.
	SetClockTrusted(trusted bool, reason string)
	// Event records an event of kind about this node.
	Event(kind, format string, args ...any)
}

// Watch is the node's offset monitor and what it last decided.
type Watch struct {
	mon  *hlc.OffsetMonitor
	wall Wall
	node Node

	mu sync.Mutex
	// last is the latest judgement (Check).
	last hlc.ClockHealth
	// peers are those with an offset gauge, to delete when they go.
	peers map[uint64]bool
	// steps is the wall clock's step count when the estimates were last
	// dropped: those measured before a step compare a clock that is gone.
	steps uint64
	// pending is the step the node's time was last seen not following.
	pending time.Duration
	// answered is the wall clock's step count at this node's latest
	// answer to each peer (Answer, NoteEstimate).
	answered map[uint64]uint64
	// measured is the latest estimate of each peer's offset, until it is
	// sent to the peer (NotePushAnswer, Estimate); ttl is how long an
	// estimate counts for.
	measured map[uint64]measured
	ttl      time.Duration

	offsets  *prometheus.GaugeVec
	untrust  prometheus.Gauge
	refused  prometheus.Counter
	logEvery time.Time // refusals are logged at most once a second
}

// New is the watch of a node whose wall clock is wall, whose maximum clock
// offset is maxOffset and that pushes closed timestamps every
// pushInterval; its metrics go to reg.
func New(maxOffset, pushInterval time.Duration, wall Wall, node Node, reg prometheus.Registerer) *Watch {
	c := &Watch{
		mon:      hlc.NewOffsetMonitor(maxOffset, offsetTTLIntervals*pushInterval),
		wall:     wall,
		node:     node,
		steps:    wall.Steps(),
		last:     hlc.ClockHealth{Trusted: true},
		peers:    map[uint64]bool{},
		answered: map[uint64]uint64{},
		measured: map[uint64]measured{},
		ttl:      offsetTTLIntervals * pushInterval,
		offsets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidekv_clock_offset_seconds", Help: "Estimated offset of each peer's wall clock from this node's (positive: the peer's is ahead), from the round trips of closed-timestamp exchanges (a node that answers one takes the initiator's estimate negated).",
		}, []string{"peer"}),
		untrust: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tidekv_clock_untrusted", Help: "1 while this node's clock is beyond 0.8 × the maximum offset from a majority of its peers: it then holds no leases.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tidekv_clock_remote_refused_total", Help: "Timestamps from other nodes or clients refused for lying further ahead of this node's clock than the maximum offset.",
		}),
	}
	reg.MustRegister(c.offsets, c.untrust, c.refused)
	return c
}

// Update folds a remote HLC timestamp, received at now from from, into
// clock; one beyond the maximum offset is counted and refused. Zero (a
// sender from before HLC) is ignored.
func (c *Watch) Update(clock HLC, ts *tidekvpb.Timestamp, from string, now time.Time) error {
	t := ts.HLC()
	if t.IsZero() {
		return nil
	}
	_, err := clock.Update(t)
	if err != nil {
		c.refused.Inc()
		c.mu.Lock()
		quiet := now.Before(c.logEvery)
		if !quiet {
			c.logEvery = now.Add(time.Second)
		}
		c.mu.Unlock()
		if !quiet {
			log.Printf("clock: refused a timestamp from %s: %v", from, err)
		}
	}
	return err
}

// Sample is the start of a round trip that measures a peer's clock.
type Sample struct {
	sent  time.Time
	steps uint64
}

// Begin starts a round trip: call it just before sending.
func (c *Watch) Begin() Sample {
	steps := c.wall.Steps()
	return Sample{sent: c.wall.WallNow(), steps: steps}
}

// Answer is what a node answers a round trip from peer with: its wall
// clock. It remembers the wall clock's step count for the estimate the
// peer measures from this answer and sends back (NoteEstimate).
func (c *Watch) Answer(peer uint64) time.Time {
	steps := c.wall.Steps()
	c.mu.Lock()
	c.answered[peer] = steps
	c.mu.Unlock()
	return c.wall.WallNow()
}

// NotePushAnswer takes what a push's answer says about the peer's clock:
// its HLC (the error says whether it was refused), and the offset estimate
// from the round trip begun with s (now: when the estimate was made, on
// any clock whose differences are true durations), which it also keeps
// for the node to send the peer (Estimate). A round trip across a step of
// this node's wall clock measures nothing and is dropped.
func (c *Watch) NotePushAnswer(clock HLC, peer uint64, s Sample, now time.Time, resp *tidekvpb.ClosedTimestampsResponse) error {
	err := c.Update(clock, resp.GetHlc(), "node "+strconv.FormatUint(peer, 10), now)
	if resp.GetUnixNanos() == 0 {
		return err // a peer from before the offset monitor
	}
	received := c.wall.WallNow()
	if c.wall.Steps() != s.steps {
		return err
	}
	off, unc, ok := hlc.MeasureOffset(s.sent.UnixNano(), resp.GetUnixNanos(), received.UnixNano())
	if ok {
		o := hlc.Offset{Offset: off, Uncertainty: unc, MeasuredAt: now}
		c.mon.Record(peer, o)
		c.mu.Lock()
		c.measured[peer] = measured{o, s.steps}
		c.mu.Unlock()
	}
	return err
}

// measured is the latest estimate of a peer's offset and the wall clock's
// step count it was measured at.
type measured struct {
	hlc.Offset
	steps uint64
}

// Estimate is, once, the latest offset estimate of peer measured at now or
// before (nil if none): what the node sends the peer in its next exchange,
// with its age. One from before a step of the wall clock, or older than an
// estimate counts for, is dropped.
func (c *Watch) Estimate(peer uint64, now time.Time) *tidekvpb.OffsetEstimate {
	c.mu.Lock()
	m, ok := c.measured[peer]
	delete(c.measured, peer)
	c.mu.Unlock()
	age := now.Sub(m.MeasuredAt)
	if !ok || m.steps != c.wall.Steps() || age < 0 || age > c.ttl {
		return nil
	}
	return &tidekvpb.OffsetEstimate{OffsetNanos: int64(m.Offset.Offset), UncertaintyNanos: int64(m.Uncertainty), AgeNanos: int64(age)}
}

// NoteEstimate takes, at now, the estimate peer measured of this node's
// clock from the round trip this node last answered (Answer), negated:
// the peer's offset from this node is minus this node's from the peer,
// within the same uncertainty and as old, as if this node had made the
// round trip. It is dropped if this node's wall clock stepped since that
// answer (it compares a clock that is gone).
func (c *Watch) NoteEstimate(peer uint64, est *tidekvpb.OffsetEstimate, now time.Time) {
	if est == nil {
		return
	}
	c.mu.Lock()
	steps, ok := c.answered[peer]
	c.mu.Unlock()
	if !ok || steps != c.wall.Steps() {
		return
	}
	c.mon.Record(peer, hlc.Offset{
		Offset:      -time.Duration(est.GetOffsetNanos()),
		Uncertainty: time.Duration(est.GetUncertaintyNanos()),
		MeasuredAt:  now.Add(-time.Duration(est.GetAgeNanos())),
	})
}

// Check judges the node's clock at now and acts on the judgement; the
// node runs it every push interval.
func (c *Watch) Check(now time.Time) {
	if steps := c.wall.Steps(); steps != c.steps {
		c.mon.Reset()
		c.steps = steps
	}
	h := c.mon.Health(now)
	c.node.SetClockTrusted(h.Trusted, h.Reason)
	c.followStep(h)
	c.mu.Lock()
	was := c.last.Trusted
	c.last = h
	for p := range c.peers {
		if _, ok := h.Offsets[p]; !ok {
			c.offsets.DeleteLabelValues(strconv.FormatUint(p, 10))
			delete(c.peers, p)
		}
	}
	for p, o := range h.Offsets {
		c.peers[p] = true
		c.offsets.WithLabelValues(strconv.FormatUint(p, 10)).Set(o.Offset.Seconds())
	}
	c.mu.Unlock()
	switch {
	case !h.Trusted:
		c.untrust.Set(1)
		if was {
			c.node.Event("clock-untrusted", "holding no leases: %s", h.Reason)
			log.Printf("clock: holding no leases: %s", h.Reason)
		}
	case !was:
		c.untrust.Set(0)
		c.node.Event("clock-trusted", "clock within %v of %d of %d peers again: holding leases again", c.mon.Tolerance(), h.Known-h.Far, h.Known)
		log.Printf("clock: trusted again")
	}
}

// followStep lets the node's time follow a step of the wall clock once
// estimates measured since (the older ones are dropped) find it trusted:
// the peers' clocks moved with it, or it stepped back to theirs.
func (c *Watch) followStep(h hlc.ClockHealth) {
	p := c.wall.Pending()
	switch {
	case p == 0:
		c.pending = 0
	case h.Trusted && h.Known > 0:
		c.wall.Follow()
		c.pending = 0
		c.node.Event("clock-step-followed", "the wall clock's step of %v agrees with %d of %d peers: the node's time follows it", p.Round(time.Millisecond), h.Known-h.Far, h.Known)
		log.Printf("clock: following a step of the wall clock of %v", p.Round(time.Millisecond))
	case c.pending == 0:
		c.pending = p
		c.node.Event("clock-step", "the wall clock stepped by %v: the node's time keeps to the monotonic clock until the peers' clocks agree with the step", p.Round(time.Millisecond))
		log.Printf("clock: the wall clock stepped by %v; not followed until the peers agree", p.Round(time.Millisecond))
	}
}

// Health is the latest judgement of the node's clock.
func (c *Watch) Health() hlc.ClockHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// MaxOffsetMs is the estimate in h furthest from 0, signed, in ms.
func MaxOffsetMs(h hlc.ClockHealth) float64 {
	var far time.Duration
	for _, o := range h.Offsets {
		if o.Offset.Abs() > far.Abs() {
			far = o.Offset
		}
	}
	return float64(far) / float64(time.Millisecond)
}
