package server

import (
	"context"
	"errors"
	"log"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Clocks (docs/design.md, "Clocks"). Each node has one hybrid logical clock
// (the store's, over its injectable wall clock) and folds in the HLC of
// every closed-timestamp push and KV Batch message it receives; one further
// ahead than the maximum offset is refused and counted, never adopted.
// Every push's round trip also gives an estimate of the offset between the
// two nodes' wall clocks. When this node's clock is certainly beyond 0.8 ×
// the maximum offset from a majority of the peers it has estimates for, it
// stops holding leases (raftstore.Store.SetClockTrusted) and says so: an
// event, a log line, its metrics, its heartbeat (ctl status, dashboard)
// and its load. The control loop, seeing the heartbeat, moves the
// leadership of its ranges to nodes whose clocks are trusted (placement's
// clock policy, through the runner) and moves no lease to it.

// offsetTTLIntervals is how many push intervals an offset estimate counts
// for: long enough to keep a narrow one over a few delayed round trips,
// short enough that a clock that jumps is noticed within a second.
const offsetTTLIntervals = 10

// clockState is the node's offset monitor and what it last decided.
type clockState struct {
	mon *hlc.OffsetMonitor

	mu sync.Mutex
	// last is the latest judgement (checkClock).
	last hlc.ClockHealth
	// peers are those with an offset gauge, to delete when they go.
	peers map[uint64]bool

	offsets  *prometheus.GaugeVec
	untrust  prometheus.Gauge
	refused  prometheus.Counter
	logEvery time.Time // refusals are logged at most once a second
}

func newClockState(maxOffset, pushInterval time.Duration, reg prometheus.Registerer) *clockState {
	c := &clockState{
		mon:   hlc.NewOffsetMonitor(maxOffset, offsetTTLIntervals*pushInterval),
		last:  hlc.ClockHealth{Trusted: true},
		peers: map[uint64]bool{},
		offsets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tidekv_clock_offset_seconds", Help: "Estimated offset of each peer's wall clock from this node's (positive: the peer's is ahead), from the round trips of closed-timestamp pushes.",
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

// update folds a remote HLC timestamp into the node's clock; one beyond
// the maximum offset is counted and refused. Zero (a sender from before
// HLC) is ignored.
func (s *Server) updateClock(ts *tidekvpb.Timestamp, from string) error {
	t := ts.HLC()
	if t.IsZero() {
		return nil
	}
	_, err := s.store.HLC().Update(t)
	if err != nil {
		s.clock.refused.Inc()
		s.clock.mu.Lock()
		now := time.Now()
		quiet := now.Before(s.clock.logEvery)
		if !quiet {
			s.clock.logEvery = now.Add(time.Second)
		}
		s.clock.mu.Unlock()
		if !quiet {
			log.Printf("clock: refused a timestamp from %s: %v", from, err)
		}
	}
	return err
}

// notePushAnswer takes what a push's answer says about the peer's clock:
// its HLC, and the offset estimate from the round trip (sent and received
// on this node's wall clock).
func (s *Server) notePushAnswer(peer uint64, sent, received time.Time, resp *tidekvpb.ClosedTimestampsResponse) {
	_ = s.updateClock(resp.GetHlc(), "node "+strconv.FormatUint(peer, 10))
	if resp.GetUnixNanos() == 0 {
		return // a peer from before the offset monitor
	}
	off, unc, ok := hlc.MeasureOffset(sent.UnixNano(), resp.GetUnixNanos(), received.UnixNano())
	if ok {
		s.clock.mon.Record(peer, hlc.Offset{Offset: off, Uncertainty: unc, MeasuredAt: time.Now()})
	}
}

// checkClock judges the node's clock every push interval and acts on the
// judgement.
func (s *Server) checkClock(context.Context) {
	h := s.clock.mon.Health(time.Now())
	s.store.SetClockTrusted(h.Trusted, h.Reason)
	c := s.clock
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
			s.events.Record("clock-untrusted", nodeSubject(s.nodeID), "holding no leases: %s", h.Reason)
			log.Printf("clock: holding no leases: %s", h.Reason)
		}
	case !was:
		c.untrust.Set(0)
		s.events.Record("clock-trusted", nodeSubject(s.nodeID), "clock within %v of %d of %d peers again: holding leases again", c.mon.Tolerance(), h.Known-h.Far, h.Known)
		log.Printf("clock: trusted again")
	}
}

// clockHealth is the latest judgement of the node's clock.
func (s *Server) clockHealth() hlc.ClockHealth {
	s.clock.mu.Lock()
	defer s.clock.mu.Unlock()
	return s.clock.last
}

// maxClockOffsetMs is the estimate furthest from 0, signed, in ms.
func maxClockOffsetMs(h hlc.ClockHealth) float64 {
	var far time.Duration
	for _, o := range h.Offsets {
		if o.Offset.Abs() > far.Abs() {
			far = o.Offset
		}
	}
	return ms(far)
}

// clockUntrustedOn reports whether a node's latest load says its clock is
// not trusted (unknown nodes are not known to be untrusted).
func (s *Server) clockUntrustedOn(node uint64) bool {
	for _, l := range s.loads.list() {
		if l.GetNodeId() == node {
			return l.GetClockUntrusted()
		}
	}
	return false
}

// errClockUntrusted refuses a lease transfer to a node whose clock is not
// trusted.
var errClockUntrusted = errors.New("its clock is not trusted (offset monitor), so it takes no leases")
