package events

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// NodeSubject and RangeSubject name event subjects the same way
// everywhere: the node, the range operations, the GC queue and the control
// loop record under them, and tests and the dashboard look them up.
func NodeSubject(id uint64) string  { return fmt.Sprintf("node %d", id) }
func RangeSubject(id uint64) string { return fmt.Sprintf("range %d", id) }

// Log is a bounded ring of events: the newest Capacity events younger than
// Window are kept. Safe for concurrent use.
type Log struct {
	node   uint64
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	ring []*tidekvpb.Event
	next int // where the next event goes once the ring is full
	full bool
}

// Config bounds the log.
type Config struct {
	// Capacity is the most events kept (count). Default 1000.
	Capacity int
	// Window is how long an event is kept (duration). Default 1h.
	Window time.Duration
}

// DefaultConfig keeps an hour or a thousand events, whichever is fewer.
func DefaultConfig() Config { return Config{Capacity: 1000, Window: time.Hour} }

// Validate reports a bound that cannot work.
func (c Config) Validate() error {
	if c.Capacity <= 0 {
		return fmt.Errorf("events: capacity must be positive, got %d", c.Capacity)
	}
	if c.Window <= 0 {
		return fmt.Errorf("events: window must be positive, got %v", c.Window)
	}
	return nil
}

// New returns an empty log for node; now is the clock (time.Now outside
// tests).
func New(cfg Config, node uint64, now func() time.Time) *Log {
	return &Log{node: node, window: cfg.Window, now: now, ring: make([]*tidekvpb.Event, 0, cfg.Capacity)}
}

// SetNode sets the node ID stamped on later events (a node learns its ID
// after it starts logging).
func (l *Log) SetNode(id uint64) {
	l.mu.Lock()
	l.node = id
	l.mu.Unlock()
}

// Record adds an event; the reason is formatted like fmt.Sprintf.
func (l *Log) Record(kind, subject, reasonFormat string, args ...any) {
	e := &tidekvpb.Event{Kind: kind, Subject: subject, Reason: fmt.Sprintf(reasonFormat, args...)}
	l.mu.Lock()
	defer l.mu.Unlock()
	e.UnixNanos, e.NodeId = l.now().UnixNano(), l.node
	if len(l.ring) < cap(l.ring) {
		l.ring = append(l.ring, e)
		return
	}
	l.ring[l.next] = e
	l.next = (l.next + 1) % len(l.ring)
	l.full = true
}

// List returns the kept events, oldest first; limit > 0 keeps the newest
// limit of them.
func (l *Log) List(limit int) []*tidekvpb.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	cutoff := l.now().Add(-l.window).UnixNano()
	out := make([]*tidekvpb.Event, 0, len(l.ring))
	for i := range l.ring {
		e := l.ring[(l.next+i)%len(l.ring)]
		if e.GetUnixNanos() >= cutoff {
			out = append(out, e)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// Merge combines several nodes' lists (each oldest first) into one, oldest
// first, keeping the newest limit (0: all).
func Merge(limit int, lists ...[]*tidekvpb.Event) []*tidekvpb.Event {
	var out []*tidekvpb.Event
	for _, l := range lists {
		out = append(out, l...)
	}
	sortByTime(out)
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// sortByTime orders events by time, then node, stably, so merged lists from
// nodes with equal timestamps read the same every time.
func sortByTime(es []*tidekvpb.Event) {
	slices.SortStableFunc(es, func(a, b *tidekvpb.Event) int {
		if c := cmp.Compare(a.GetUnixNanos(), b.GetUnixNanos()); c != 0 {
			return c
		}
		return cmp.Compare(a.GetNodeId(), b.GetNodeId())
	})
}
