package server

import (
	"errors"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/events"
)

// clockNode is what the clock watch (internal/clockwatch) does to s.
type clockNode struct{ s *Server }

func (c clockNode) SetClockTrusted(trusted bool, reason string) {
	c.s.store.SetClockTrusted(trusted, reason)
}

func (c clockNode) Event(kind, format string, args ...any) {
	c.s.events.Record(kind, events.NodeSubject(c.s.id.node), format, args...)
}

// updateClock folds a remote HLC timestamp into the node's clock
// (clockwatch.Watch.Update).
func (s *Server) updateClock(ts *tidekvpb.Timestamp, from string) error {
	return s.clock.Update(s.store.HLC(), ts, from, time.Now())
}

// clockUntrustedOn reports whether a node's latest load says its clock is
// not trusted (unknown nodes are not known to be untrusted).
func (s *Server) clockUntrustedOn(node uint64) bool {
	for _, l := range s.peers.push.Loads() {
		if l.GetNodeId() == node {
			return l.GetClockUntrusted()
		}
	}
	return false
}

// errClockUntrusted refuses a lease transfer to a node whose clock is not
// trusted.
var errClockUntrusted = errors.New("its clock is not trusted (offset monitor), so it takes no leases")
