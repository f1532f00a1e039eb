package rangeload

import (
	"bytes"
	"sync"
	"time"
)

// Load is a range's recent request rate and size as seen by one node.
type Load struct {
	QPS, ReadQPS float64
	Bytes        uint64
	// Keys: live keys at the range's last exact size count.
	Keys uint64
	// HotKeyShare: the share of sampled requests on the hottest key.
	HotKeyShare float64
	// Span is the range's key span the sample was taken over.
	Span Span
	// Term is the Raft term of the lease the sample was taken under (0: not
	// the leaseholder); Stale says the sample does not cover a whole
	// window of that lease over this span (the lease or the span is newer
	// than the previous sample, or the span changed and came back), so its rates understate the load and
	// placement must not act on them.
	Term  uint64
	Stale bool
	// SpanChanges is the replica's count of changes of its span when the
	// sample was taken (Counters.SpanChanges).
	SpanChanges uint64
	// Changing: the leaseholder was running a replica change; Garbage,
	// its GC queue's estimate (both only in the meta range's copy of
	// reports).
	Changing bool
	Garbage  uint64
	// Writes is the window's writes per second by origin locality, for
	// leases to follow their writers.
	Writes map[string]float64
}

// Counters are what a node reads of one local replica at a sample.
type Counters struct {
	// Requests and Reads are the replica's running totals.
	Requests, Reads uint64
	// Bytes and Keys are its size (as last measured).
	Bytes, Keys uint64
	HotKeyShare float64
	Span        Span
	Term        uint64
	// SpanChanges counts the replica's span changes (splits and merges
	// applied) since it was loaded: a split and a merge back within one
	// window leave the span as it was, but the counters missed the
	// requests the right-hand side served meanwhile.
	SpanChanges uint64
	// Writes are the window's writes by origin (taken, so reset, by the
	// reader).
	Writes map[string]uint64
}

// Span is a range's key span [Start, End). A sample's freshness follows
// the span, not the descriptor's generation: a replica change (a learner
// or voter added or removed) bumps the generation but leaves the span,
// and the replica's counters, as they were, so its rates stay continuous;
// only a split or a merge makes the counted requests another span's (and
// a split with a merge back, the span unchanged: Counters.SpanChanges).
type Span struct{ Start, End []byte }

// SpanOf is the span of a range descriptor.
func SpanOf(d interface {
	GetStartKey() []byte
	GetEndKey() []byte
}) Span {
	return Span{Start: d.GetStartKey(), End: d.GetEndKey()}
}

// Equal reports whether s and o are the same span.
func (s Span) Equal(o Span) bool {
	return bytes.Equal(s.Start, o.Start) && bytes.Equal(s.End, o.End)
}

// Tracker turns the replicas' request counters into rates, once per
// report interval.
type Tracker struct {
	mu     sync.Mutex
	at     time.Time
	counts map[uint64][2]uint64 // requests, reads
	ranges map[uint64]Load
}

// Sample takes the local replicas' counters read at now (by range ID) and
// replaces the table with their rates since the previous sample. It
// returns the new table, which the caller may keep.
func (t *Tracker) Sample(now time.Time, cs map[uint64]Counters) map[uint64]Load {
	t.mu.Lock()
	defer t.mu.Unlock()
	counts := make(map[uint64][2]uint64, len(cs))
	ranges := make(map[uint64]Load, len(cs))
	dt := now.Sub(t.at).Seconds()
	for id, c := range cs {
		counts[id] = [2]uint64{c.Requests, c.Reads}
		l := Load{Bytes: c.Bytes, Keys: c.Keys, HotKeyShare: c.HotKeyShare, Span: c.Span, Term: c.Term, Stale: true,
			SpanChanges: c.SpanChanges}
		if prev, ok := t.counts[id]; ok && dt > 0 && c.Requests >= prev[0] && c.Reads >= prev[1] {
			l.QPS = float64(c.Requests-prev[0]) / dt
			l.ReadQPS = float64(c.Reads-prev[1]) / dt
			l.Writes = perSecond(c.Writes, dt)
			l.Stale = !CoversWindow(t.ranges[id], l)
		}
		ranges[id] = l
	}
	t.at, t.counts, t.ranges = now, counts, ranges
	out := make(map[uint64]Load, len(ranges))
	for id, l := range ranges {
		out[id] = l
	}
	return out
}

// Each calls fn with every range's last sample.
func (t *Tracker) Each(fn func(id uint64, l Load)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, l := range t.ranges {
		fn(id, l)
	}
}

// SetBytes records a new size of a range whose last sample is of span
// (a range that crossed its split line is reported at once with it,
// before the next sample).
func (t *Tracker) SetBytes(rangeID uint64, span Span, n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.ranges[rangeID]; ok && l.Span.Equal(span) {
		l.Bytes = n
		t.ranges[rangeID] = l
	}
}

// Of returns the last sample of a range's load over span, led now in term
// (the replica's LeaderTerm). A sample of another span (a split or merge
// since) says nothing about the range now: its size is measured afresh
// (size; ok false when it could not be) and its rates wait for the next
// sample, or placement would split the range again on its old numbers. A
// sample of another term (taken as a follower, or under an earlier lease)
// is stale.
func (t *Tracker) Of(rangeID uint64, span Span, term uint64, size func() (bytes, keys uint64, ok bool)) Load {
	t.mu.Lock()
	l, ok := t.ranges[rangeID]
	t.mu.Unlock()
	if ok && l.Span.Equal(span) {
		l.Stale = l.Stale || l.Term != term || term == 0
		l.Term = term
		return l
	}
	fresh := Load{Span: span, Term: term, Stale: true}
	if b, k, ok := size(); ok {
		fresh.Bytes, fresh.Keys = b, k
	}
	return fresh
}

// CoversWindow reports whether sample cur covers a whole window of one
// lease: this node led the range in the same term, with the same span and
// no split or merge in between, at the previous sample prev as well.
func CoversWindow(prev, cur Load) bool {
	return cur.Term != 0 && prev.Term == cur.Term && prev.Span.Equal(cur.Span) && prev.SpanChanges == cur.SpanChanges
}

// perSecond turns a window's counts into rates (nil for none).
func perSecond(counts map[string]uint64, seconds float64) map[string]float64 {
	if len(counts) == 0 {
		return nil
	}
	out := make(map[string]float64, len(counts))
	for k, n := range counts {
		out[k] = float64(n) / seconds
	}
	return out
}
