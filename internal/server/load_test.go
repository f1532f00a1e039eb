package server

import "testing"

// A sample is fresh only when one lease (a non-zero term on this node)
// produced the whole window over an unchanged span.
func TestCoversWindow(t *testing.T) {
	for _, c := range []struct {
		name      string
		prev, cur rangeLoad
		want      bool
	}{
		{"same lease, same span", rangeLoad{term: 5, gen: 2}, rangeLoad{term: 5, gen: 2}, true},
		{"lease acquired in the window", rangeLoad{term: 0, gen: 2}, rangeLoad{term: 5, gen: 2}, false},
		{"lost and won again", rangeLoad{term: 5, gen: 2}, rangeLoad{term: 7, gen: 2}, false},
		{"not the leaseholder", rangeLoad{term: 0, gen: 2}, rangeLoad{term: 0, gen: 2}, false},
		{"split in the window", rangeLoad{term: 5, gen: 2}, rangeLoad{term: 5, gen: 3}, false},
	} {
		if got := coversWindow(c.prev, c.cur); got != c.want {
			t.Errorf("%s: coversWindow = %v, want %v", c.name, got, c.want)
		}
	}
}
