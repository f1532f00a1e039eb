package raftstore

import (
	"bytes"
	"maps"
	"slices"

	"github.com/tidekv/tidekv/api/hlc"
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

// tsRead is the newest read of a key or span and the transaction that
// made it ("": no transaction, or several at that timestamp). A
// transaction's writes need not go above its own reads: it writes at or
// above the timestamp it read at, so the older reads its entry replaced
// are below its writes too.
type tsRead struct {
	ts  hlc.Timestamp
	txn string
}

type tsSpan struct {
	span keySpan
	tsRead
}

type tsCache struct {
	lowWater  hlc.Timestamp
	points    map[string]tsRead
	spans     []tsSpan
	maxPoints int
	maxSpans  int
}

func newTSCache(maxPoints, maxSpans int) *tsCache {
	return &tsCache{points: map[string]tsRead{}, maxPoints: maxPoints, maxSpans: maxSpans}
}

// add records a read of sp at ts by transaction txn ("": none).
func (c *tsCache) add(sp keySpan, ts hlc.Timestamp, txn string) {
	if !c.lowWater.Less(ts) {
		return
	}
	if sp.point {
		switch cur, ok := c.points[string(sp.start)]; {
		case !ok || cur.ts.Less(ts):
			c.points[string(sp.start)] = tsRead{ts: ts, txn: txn}
		case cur.ts == ts && cur.txn != txn:
			c.points[string(sp.start)] = tsRead{ts: ts} // two readers: neither's own
		}
		if len(c.points) > c.maxPoints {
			c.evictPoints()
		}
		return
	}
	c.spans = append(c.spans, tsSpan{span: sp, tsRead: tsRead{ts: ts, txn: txn}})
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
	maps.DeleteFunc(c.points, func(_ string, r tsRead) bool { return !ts.Less(r.ts) })
	c.spans = slices.DeleteFunc(c.spans, func(s tsSpan) bool { return !ts.Less(s.ts) })
}

// max is the highest timestamp sp was read at by others than transaction
// txn ("": every read counts), at least the low-water mark.
func (c *tsCache) max(sp keySpan, txn string) hlc.Timestamp {
	out := c.lowWater
	other := func(r tsRead) bool { return out.Less(r.ts) && (txn == "" || r.txn != txn) }
	if sp.point {
		if r, ok := c.points[string(sp.start)]; ok && other(r) {
			out = r.ts
		}
	} else {
		for k, r := range c.points {
			if other(r) && sp.contains([]byte(k)) {
				out = r.ts
			}
		}
	}
	for _, s := range c.spans {
		if other(s.tsRead) && s.span.overlaps(sp) {
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
	for _, r := range c.points {
		tss = append(tss, r.ts)
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
