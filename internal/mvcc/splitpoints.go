package mvcc

import (
	"bytes"
	"cmp"
	"slices"
)

// splitCheckpoints bounds the candidate keys SplitPoints keeps: with this
// many it drops every other one and samples keys half as often, so memory
// stays bounded and a cut is within one sampling stride of its target.
const splitCheckpoints = 1024

// SplitPoints collects candidate split keys from a span read in key order,
// in bounded memory, and cuts the span's bytes into equal pieces at them.
// Both layouts of a range's data (versioned here, the older unversioned
// one in raftstore) find their split keys through it.
type SplitPoints struct {
	cps    []splitPoint
	stride int
	keys   int
	total  uint64
}

type splitPoint struct {
	key    []byte
	before uint64 // bytes read before key
}

// Add records n bytes read. newKey marks the first entry of a key, a
// candidate unless it is the span's first key (a left piece must not be
// empty); key returns it, and is called only for the candidates kept.
func (p *SplitPoints) Add(newKey bool, key func() []byte, n uint64) {
	if newKey {
		if p.stride == 0 {
			p.stride = 1
		}
		if p.keys > 0 && p.keys%p.stride == 0 {
			p.cps = append(p.cps, splitPoint{key: key(), before: p.total})
			if len(p.cps) == splitCheckpoints {
				// Keep the candidates at multiples of 2·stride: the odd ones.
				kept := p.cps[:0]
				for i := 1; i < len(p.cps); i += 2 {
					kept = append(kept, p.cps[i])
				}
				clear(p.cps[len(kept):])
				p.cps, p.stride = kept, 2*p.stride
			}
		}
		p.keys++
	}
	p.total += n
}

// Keys is how many keys were read; Total how many bytes.
func (p *SplitPoints) Keys() int     { return p.keys }
func (p *SplitPoints) Total() uint64 { return p.total }

// Cut returns the ascending keys nearest to the points that divide the
// bytes into pieces equal parts (fewer when candidates are few; none for a
// span of fewer than two keys). Between two candidates equally near a
// point, the first wins.
func (p *SplitPoints) Cut(pieces int) [][]byte {
	var out [][]byte
	if len(p.cps) == 0 {
		return nil
	}
	for i := 1; i < pieces; i++ {
		k := p.nearest(p.total * uint64(i) / uint64(pieces)).key
		if len(out) == 0 || bytes.Compare(k, out[len(out)-1]) > 0 {
			out = append(out, k)
		}
	}
	return out
}

func (p *SplitPoints) nearest(target uint64) splitPoint {
	cps := p.cps
	i, _ := slices.BinarySearchFunc(cps, target, func(c splitPoint, t uint64) int { return cmp.Compare(c.before, t) })
	switch {
	case i == len(cps):
		return cps[i-1]
	case i > 0 && target-cps[i-1].before <= cps[i].before-target:
		return cps[i-1]
	}
	return cps[i]
}
