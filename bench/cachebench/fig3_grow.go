package cachebench

import (
	"slices"
	"time"

	"github.com/tidekv/tidekv/internal/elastic"
)

// grow is the planner's overflow round for the growing key space at the
// start of step step: nodes whose start time has passed join, then the
// overflow policy may ask for a node (it joins NodeStartSteps later) and
// split or move ranges, which the model does at once. It returns the
// steps at which nodes joined.
func (m *model) grow(now time.Time, step int) []int {
	var joined []int
	for len(m.pending) > 0 && m.pending[0] <= step {
		m.pending = m.pending[1:]
		m.addNode()
		joined = append(joined, step)
	}
	plan := m.overflow.Round(elastic.OverflowInput{
		Now:      now,
		Live:     slices.Clone(m.live),
		Settling: len(m.pending) > 0,
		Lead:     time.Duration(m.cfg.NodeStartSteps) * time.Second,
		Spaces:   []elastic.CacheSpace{m.space()},
	})
	if plan.Launch != "" && len(m.nodes)+len(m.pending) < m.cfg.MaxNodes {
		m.pending = append(m.pending, step+m.cfg.NodeStartSteps)
	}
	for _, sh := range plan.Sheds {
		r := m.rangeByID(sh.Range)
		switch {
		case r < 0:
		case sh.Split && m.ranges[r].gen == sh.Generation:
			m.split(r)
		case !sh.Split:
			m.move(r, int(sh.To)-1)
		}
	}
	return joined
}

// space is the key space as the overflow policy sees it (RF 1: a range's
// one replica is on its node).
func (m *model) space() elastic.CacheSpace {
	sp := elastic.CacheSpace{Name: "cache", Capacity: m.cfg.CapacityPerNode}
	for _, r := range m.ranges {
		sp.Ranges = append(sp.Ranges, elastic.CacheRange{ID: r.id, Generation: r.gen, Bytes: r.bytes, Nodes: []uint64{uint64(r.node + 1)}})
	}
	return sp
}

func (m *model) rangeByID(id uint64) int {
	return slices.IndexFunc(m.ranges, func(r mrange) bool { return r.id == id })
}

// keysOf is the cached keys of range r.
func (m *model) keysOf(r int) []int32 {
	var out []int32
	for _, k := range m.nodes[m.ranges[r].node].keys {
		if m.rangeOf(m.hashes[k]) == r {
			out = append(out, k)
		}
	}
	return out
}

// split cuts range r at the median hash of its cached keys, as a size
// split of a hashed range does; the upper half is a new range on the same
// node. A range of fewer than two keys stays whole.
func (m *model) split(r int) {
	keys := m.keysOf(r)
	if len(keys) < 2 {
		return
	}
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = m.hashes[k]
	}
	slices.Sort(hs)
	mid := hs[len(hs)/2]
	upper := mrange{id: m.nextRange, gen: 1, lo: mid, node: m.ranges[r].node}
	m.nextRange++
	for _, k := range keys {
		if m.hashes[k] >= mid {
			m.ranges[r].bytes -= m.entry[k]
			upper.bytes += m.entry[k]
		}
	}
	m.ranges[r].gen++
	m.ranges = slices.Insert(m.ranges, r+1, upper)
}

// move hands range r with its keys to node to. The new node does not know
// when they were last used (Recency is not replicated), so the source
// forgets them and the target takes them as least recently used.
func (m *model) move(r, to int) {
	from := m.nodes[m.ranges[r].node]
	for _, k := range m.keysOf(r) {
		from.recency.Forget(m.keys[k])
		m.remove(int(k))
		m.add(int(k), to)
	}
	m.ranges[r].node = to
}
