package rangeload

import (
	"testing"
	"time"
)

// A sample is fresh only when one lease (a non-zero term on this node)
// produced the whole window over an unchanged span.
func TestCoversWindow(t *testing.T) {
	for _, c := range []struct {
		name      string
		prev, cur Load
		want      bool
	}{
		{"same lease, same span", Load{Term: 5, Gen: 2}, Load{Term: 5, Gen: 2}, true},
		{"lease acquired in the window", Load{Term: 0, Gen: 2}, Load{Term: 5, Gen: 2}, false},
		{"lost and won again", Load{Term: 5, Gen: 2}, Load{Term: 7, Gen: 2}, false},
		{"not the leaseholder", Load{Term: 0, Gen: 2}, Load{Term: 0, Gen: 2}, false},
		{"split in the window", Load{Term: 5, Gen: 2}, Load{Term: 5, Gen: 3}, false},
	} {
		if got := CoversWindow(c.prev, c.cur); got != c.want {
			t.Errorf("%s: CoversWindow = %v, want %v", c.name, got, c.want)
		}
	}
}

// Rates are the counters' growth over the window; the first sample of a
// range has none and is stale, a range of another generation is measured
// afresh.
func TestTrackerSample(t *testing.T) {
	var tr Tracker
	t0 := time.Unix(100, 0)
	tr.Sample(t0, map[uint64]Counters{1: {Requests: 10, Reads: 4, Gen: 2, Term: 5}})
	got := tr.Sample(t0.Add(2*time.Second), map[uint64]Counters{1: {Requests: 30, Reads: 8, Bytes: 7, Gen: 2, Term: 5,
		Writes: map[string]uint64{"region=eu": 6}}})[1]
	if got.QPS != 10 || got.ReadQPS != 2 || got.Bytes != 7 || got.Stale || got.Writes["region=eu"] != 3 {
		t.Fatalf("second sample = %+v, want 10 qps, 2 reads/s, 7 bytes, fresh, 3 writes/s from eu", got)
	}
	if l := tr.Of(1, 2, 6, nil); !l.Stale || l.Term != 6 || l.QPS != 10 {
		t.Errorf("Of in a later term = %+v, want the rates marked stale under term 6", l)
	}
	l := tr.Of(1, 3, 5, func() (uint64, uint64, bool) { return 9, 1, true })
	if l.QPS != 0 || l.Bytes != 9 || l.Keys != 1 || !l.Stale || l.Gen != 3 {
		t.Errorf("Of after a split = %+v, want no rates, the fresh size and stale", l)
	}
}
