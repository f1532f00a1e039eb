package routed

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/tidekv/tidekv/internal/storage"
)

// Span is [Lo, Hi); both bounds are required.
type Span struct {
	Lo, Hi []byte
}

// part is a span owned by engine eng (an index into table.engs; base is
// baseIdx).
type part struct {
	Span
	eng int
}

const baseIdx = -1

// table is an immutable routing: disjoint parts sorted by start. Readers
// load it without a lock; AddPart replaces it.
type table struct {
	parts []part
	engs  []storage.Engine
}

// engineOf is the engine owning key.
func (t *table) engineOf(key []byte) int {
	i := sort.Search(len(t.parts), func(i int) bool { return bytes.Compare(t.parts[i].Hi, key) > 0 })
	if i < len(t.parts) && bytes.Compare(t.parts[i].Lo, key) <= 0 {
		return t.parts[i].eng
	}
	return baseIdx
}

// piece is a sub-span of a request owned by one engine.
type piece struct {
	lo, hi []byte // hi nil: unbounded
	eng    int
}

// pieces cuts [lower, upper) (nil upper: unbounded) where ownership
// changes, in key order. An empty span is one piece, of its start's owner.
func (t *table) pieces(lower, upper []byte) []piece {
	if len(t.parts) == 0 || (upper != nil && bytes.Compare(lower, upper) >= 0) {
		return []piece{{lower, upper, t.engineOf(lower)}}
	}
	var out []piece
	cur := lower
	for _, p := range t.parts {
		if bytes.Compare(p.Hi, cur) <= 0 {
			continue
		}
		if upper != nil && bytes.Compare(p.Lo, upper) >= 0 {
			break
		}
		if bytes.Compare(cur, p.Lo) < 0 {
			out = append(out, piece{cur, p.Lo, baseIdx})
			cur = p.Lo
		}
		hi := p.Hi
		if upper != nil && bytes.Compare(upper, hi) < 0 {
			hi = upper
		}
		out = append(out, piece{cur, hi, p.eng})
		cur = hi
	}
	if upper == nil || bytes.Compare(cur, upper) < 0 {
		out = append(out, piece{cur, upper, baseIdx})
	}
	return out
}

// with returns a table with eng owning spans, or an error if a span is
// empty, unbounded or overlaps a part.
func (t *table) with(eng storage.Engine, spans []Span) (*table, error) {
	n := &table{parts: append([]part(nil), t.parts...), engs: append(append([]storage.Engine(nil), t.engs...), eng)}
	for _, s := range spans {
		if s.Hi == nil || bytes.Compare(s.Lo, s.Hi) >= 0 {
			return nil, fmt.Errorf("routed: span [%q, %q) is empty or unbounded", s.Lo, s.Hi)
		}
		for _, p := range n.parts {
			if bytes.Compare(s.Lo, p.Hi) < 0 && bytes.Compare(p.Lo, s.Hi) < 0 {
				return nil, fmt.Errorf("routed: span [%q, %q) overlaps part [%q, %q)", s.Lo, s.Hi, p.Lo, p.Hi)
			}
		}
		n.parts = append(n.parts, part{Span{bytes.Clone(s.Lo), bytes.Clone(s.Hi)}, len(n.engs) - 1})
	}
	sort.Slice(n.parts, func(i, j int) bool { return bytes.Compare(n.parts[i].Lo, n.parts[j].Lo) < 0 })
	return n, nil
}
