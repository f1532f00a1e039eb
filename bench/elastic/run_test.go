package elastic

import (
	"math"
	"testing"
)

// TestSearch: the sustainable-rate search climbs from a rate below the
// answer, descends from one above it, and ends within calRefine of the
// true limit in a handful of trials.
func TestSearch(t *testing.T) {
	for _, c := range []struct{ start, limit float64 }{
		{300, 985}, {1200, 500}, {1000, 1000}, {100, 101},
	} {
		tries := 0
		got := search(c.start, func(rate float64) bool { tries++; return rate <= c.limit })
		if got > c.limit || got < c.limit/calRefine {
			t.Errorf("from %v, limit %v: found %v, want within [limit/%v, limit]", c.start, c.limit, got, calRefine)
		}
		if max := int(math.Ceil(math.Abs(math.Log(c.limit/c.start))/math.Log(calRise))) + 3; tries > max {
			t.Errorf("from %v, limit %v: %d trials, want at most %d", c.start, c.limit, tries, max)
		}
	}
	if got := search(100, func(float64) bool { return false }); got != 0 {
		t.Errorf("nothing sustained: found %v, want 0", got)
	}
}
