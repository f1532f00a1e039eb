package rangeload

import (
	"testing"
	"time"
)

var (
	ab = Span{Start: []byte("a"), End: []byte("b")}
	ac = Span{Start: []byte("a"), End: []byte("c")}
)

// A sample is fresh only when one lease (a non-zero term on this node)
// produced the whole window over an unchanged span.
func TestCoversWindow(t *testing.T) {
	for _, c := range []struct {
		name      string
		prev, cur Load
		want      bool
	}{
		{"same lease, same span", Load{Term: 5, Span: ac}, Load{Term: 5, Span: ac}, true},
		{"lease acquired in the window", Load{Term: 0, Span: ac}, Load{Term: 5, Span: ac}, false},
		{"lost and won again", Load{Term: 5, Span: ac}, Load{Term: 7, Span: ac}, false},
		{"not the leaseholder", Load{Term: 0, Span: ac}, Load{Term: 0, Span: ac}, false},
		{"split in the window", Load{Term: 5, Span: ac}, Load{Term: 5, Span: ab}, false},
		{"merged in the window", Load{Term: 5, Span: ab}, Load{Term: 5, Span: ac}, false},
		{"split and merged back in the window", Load{Term: 5, Span: ac}, Load{Term: 5, Span: ac, SpanChanges: 2}, false},
	} {
		if got := CoversWindow(c.prev, c.cur); got != c.want {
			t.Errorf("%s: CoversWindow = %v, want %v", c.name, got, c.want)
		}
	}
}

// Rates are the counters' growth over the window; the first sample of a
// range has none and is stale, a range of another span is measured
// afresh.
func TestTrackerSample(t *testing.T) {
	var tr Tracker
	t0 := time.Unix(100, 0)
	tr.Sample(t0, map[uint64]Counters{1: {Requests: 10, Reads: 4, Span: ac, Term: 5}})
	got := tr.Sample(t0.Add(2*time.Second), map[uint64]Counters{1: {Requests: 30, Reads: 8, Bytes: 7, Span: ac, Term: 5,
		Writes: map[string]uint64{"region=eu": 6}}})[1]
	if got.QPS != 10 || got.ReadQPS != 2 || got.Bytes != 7 || got.Stale || got.Writes["region=eu"] != 3 {
		t.Fatalf("second sample = %+v, want 10 qps, 2 reads/s, 7 bytes, fresh, 3 writes/s from eu", got)
	}
	if l := tr.Of(1, ac, 6, nil); !l.Stale || l.Term != 6 || l.QPS != 10 {
		t.Errorf("Of in a later term = %+v, want the rates marked stale under term 6", l)
	}
	l := tr.Of(1, ab, 5, func() (uint64, uint64, bool) { return 9, 1, true })
	if l.QPS != 0 || l.Bytes != 9 || l.Keys != 1 || !l.Stale || !l.Span.Equal(ab) {
		t.Errorf("Of after a split = %+v, want no rates, the fresh size and stale", l)
	}
}

// A replica change (a learner or voter added, the descriptor's generation
// bumped) leaves the span and the leaseholder's counters as they were: the
// sample stays fresh and its rate runs on. A split or a merge between two
// samples makes the rates another span's: stale until a whole window has
// been counted over the new span.
func TestFreshnessFollowsSpan(t *testing.T) {
	t0 := time.Unix(100, 0)
	noSize := func() (uint64, uint64, bool) { t.Fatal("size measured for an unchanged span"); return 0, 0, false }
	sample := func(tr *Tracker, s int, requests uint64, span Span) Load {
		return tr.Sample(t0.Add(time.Duration(s)*3*time.Second), map[uint64]Counters{1: {Requests: requests, Span: span, Term: 5}})[1]
	}

	var tr Tracker
	sample(&tr, 0, 0, ac)
	sample(&tr, 1, 300, ac)
	// A learner is added: the descriptor is newer, the span the same.
	if l := tr.Of(1, ac, 5, noSize); l.Stale || l.QPS != 100 {
		t.Errorf("Of right after a replica change = %+v, want fresh at 100 requests/s", l)
	}
	if l := sample(&tr, 2, 600, ac); l.Stale || l.QPS != 100 {
		t.Errorf("sample across a replica change = %+v, want fresh at 100 requests/s", l)
	}

	for _, c := range []struct {
		name     string
		from, to Span
	}{{"split", ac, ab}, {"merge", ab, ac}} {
		var tr Tracker
		sample(&tr, 0, 0, c.from)
		sample(&tr, 1, 300, c.from)
		sized := false
		if l := tr.Of(1, c.to, 5, func() (uint64, uint64, bool) { sized = true; return 9, 1, true }); !l.Stale || l.QPS != 0 || !sized {
			t.Errorf("%s: Of right after = %+v (sized %v), want stale, no rate, size measured afresh", c.name, l, sized)
		}
		if l := sample(&tr, 2, 600, c.to); !l.Stale {
			t.Errorf("%s: first sample over the new span = %+v, want stale", c.name, l)
		}
		if l := sample(&tr, 3, 900, c.to); l.Stale || l.QPS != 100 {
			t.Errorf("%s: second sample over the new span = %+v, want fresh at 100 requests/s", c.name, l)
		}
	}
}

// A split and a merge back to the same span within one window leave the
// span as it was, but the left side's counters missed what the right side
// served in between: stale until a whole window is counted after them.
func TestFreshnessAfterSplitAndMergeBack(t *testing.T) {
	t0 := time.Unix(100, 0)
	var tr Tracker
	sample := func(s int, requests, changes uint64) Load {
		return tr.Sample(t0.Add(time.Duration(s)*3*time.Second),
			map[uint64]Counters{1: {Requests: requests, Span: ac, Term: 5, SpanChanges: changes}})[1]
	}
	sample(0, 0, 0)
	if l := sample(1, 300, 0); l.Stale {
		t.Fatalf("sample before the split = %+v, want fresh", l)
	}
	if l := sample(2, 400, 2); !l.Stale {
		t.Errorf("sample over a split and merge back = %+v, want stale", l)
	}
	if l := sample(3, 700, 2); l.Stale || l.QPS != 100 {
		t.Errorf("next sample = %+v, want fresh at 100 requests/s", l)
	}
}
