package raftstore

import (
	"bytes"
	"maps"
	"slices"

	"github.com/tidekv/tidekv/internal/hlc"
)

// The timestamp cache: per range, in the leaseholder's memory (never
// replicated), the highest timestamp each key or span was read at. A write
// is stamped above every read of its keys (readorder.go), so no write lands
// under a read that was served. It is bounded: past its limits the older
// half of its entries go and lowWater, which every write stays above, rises
// to the newest of them; that only pushes writes higher. A closed timestamp
// (closed.go) raises lowWater too: it is a read of the whole range.

// keySpan is a key (point) or the span [start, end) (end nil: unbounded).
type keySpan struct {
	start, end []byte
	point      bool
}

func pointSpan(k []byte) keySpan { return keySpan{start: k, point: true} }

func (s keySpan) contains(k []byte) bool {
	if s.point {
		return bytes.Equal(s.start, k)
	}
	return bytes.Compare(s.start, k) <= 0 && (s.end == nil || bytes.Compare(k, s.end) < 0)
}

func (s keySpan) overlaps(o keySpan) bool {
	switch {
	case s.point:
		return o.contains(s.start)
	case o.point:
		return s.contains(o.start)
	}
	return (o.end == nil || bytes.Compare(s.start, o.end) < 0) && (s.end == nil || bytes.Compare(o.start, s.end) < 0)
}

// Default bounds of a range's timestamp cache: a few hundred kilobytes at
// most for a range read at timestamps key by key.
const (
	tsCachePoints = 4096
	tsCacheSpans  = 64
)

type tsSpan struct {
	span keySpan
	ts   hlc.Timestamp
}

type tsCache struct {
	lowWater  hlc.Timestamp
	points    map[string]hlc.Timestamp
	spans     []tsSpan
	maxPoints int
	maxSpans  int
}

func newTSCache(maxPoints, maxSpans int) *tsCache {
	return &tsCache{points: map[string]hlc.Timestamp{}, maxPoints: maxPoints, maxSpans: maxSpans}
}

// add records a read of sp at ts.
func (c *tsCache) add(sp keySpan, ts hlc.Timestamp) {
	if !c.lowWater.Less(ts) {
		return
	}
	if sp.point {
		if cur, ok := c.points[string(sp.start)]; !ok || cur.Less(ts) {
			c.points[string(sp.start)] = ts
		}
		if len(c.points) > c.maxPoints {
			c.evictPoints()
		}
		return
	}
	c.spans = append(c.spans, tsSpan{span: sp, ts: ts})
	if len(c.spans) > c.maxSpans {
		c.evictSpans()
	}
}

// raise lifts the low-water mark to ts (a closed timestamp, a new lease)
// and drops the entries it covers.
func (c *tsCache) raise(ts hlc.Timestamp) {
	if !c.lowWater.Less(ts) {
		return
	}
	c.lowWater = ts
	maps.DeleteFunc(c.points, func(_ string, t hlc.Timestamp) bool { return !ts.Less(t) })
	c.spans = slices.DeleteFunc(c.spans, func(s tsSpan) bool { return !ts.Less(s.ts) })
}

// max is the highest timestamp sp was read at, at least the low-water mark.
func (c *tsCache) max(sp keySpan) hlc.Timestamp {
	out := c.lowWater
	if sp.point {
		if t, ok := c.points[string(sp.start)]; ok && out.Less(t) {
			out = t
		}
	} else {
		for k, t := range c.points {
			if out.Less(t) && sp.contains([]byte(k)) {
				out = t
			}
		}
	}
	for _, s := range c.spans {
		if out.Less(s.ts) && s.span.overlaps(sp) {
			out = s.ts
		}
	}
	return out
}

// median is the middle of tss (sorted in place).
func median(tss []hlc.Timestamp) hlc.Timestamp {
	slices.SortFunc(tss, hlc.Timestamp.Compare)
	return tss[len(tss)/2]
}

func (c *tsCache) evictPoints() {
	tss := make([]hlc.Timestamp, 0, len(c.points))
	for _, t := range c.points {
		tss = append(tss, t)
	}
	c.raise(median(tss))
}

func (c *tsCache) evictSpans() {
	tss := make([]hlc.Timestamp, len(c.spans))
	for i, s := range c.spans {
		tss[i] = s.ts
	}
	c.raise(median(tss))
}
