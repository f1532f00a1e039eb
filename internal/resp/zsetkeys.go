package resp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
)

// Sorted sets on ordered keys (doc.go, "Key encoding"). A sorted set z is
// its metadata key enc(z), whose value is zsetMarker followed by the
// member count (8 bytes, big-endian) and the index's start hint (below),
// and two spans inside the span of
// z's hash fields [enc(z) 0x00 0x01, enc(z) 0x00 0x02), so that DEL, and
// HSET or ZADD creating the key anew, clear them as they clear a hash's
// fields:
//
//	member m       enc(z) 0x00 0x01 0x01 m            -> score (8 bytes, IEEE 754 bits)
//	index entry    enc(z) 0x00 0x01 0x02 sort(s) m    -> score (8 bytes, IEEE 754 bits)
//
// sort(s) is the score's bits made to sort as the numbers do, so the
// index lists the members in Redis's order (score, then member bytes) and
// a score range is one key range.
//
// The start hint is an index suffix (sort(s) m, or empty) below which the
// index holds no entry: ZPOPMIN sets it just past what it popped, and a
// write adding an entry below it lowers it to that entry, in the
// transaction that writes the metadata anyway. Walks from the index's
// start begin there, so they do not step over the deletions (MVCC
// tombstones, until GC removes them) of the members popped before: a pop
// of a set drained from its low end costs a few keys, not the pops before
// it. An older binary's front end takes metadata longer than the marker
// and count for a string, so ZPOPMIN sets a hint only once the cluster
// lets the front end write one (SetPositioner); before, a set has none
// and its metadata is the marker and count alone.
var zsetMarker = []byte("\xffTideKV:zset\x00\x01\xfe")

const (
	zMemberTag = 0x01
	zIndexTag  = 0x02
)

// isZSetMeta tells a sorted set's metadata from a string.
func isZSetMeta(v []byte) bool {
	return len(v) >= len(zsetMarker)+8 && bytes.HasPrefix(v, zsetMarker)
}

// isMarker: v is the value of a key holding a hash or a sorted set, not a
// string; string values that would read as one are refused (errReserved).
// Those beginning as a sorted set's are all refused, so zsetMarker alone
// is never stored (zclearStale's guard).

func zsetMeta(card uint64, hint []byte) []byte {
	return append(binary.BigEndian.AppendUint64(append([]byte(nil), zsetMarker...), card), hint...)
}

func zsetCard(meta []byte) uint64 { return binary.BigEndian.Uint64(meta[len(zsetMarker):]) }

// zsetHint is the start hint of metadata meta (empty: the index's start).
func zsetHint(meta []byte) []byte { return meta[len(zsetMarker)+8:] }

// zIndexFirst is where a walk from the start of z's index begins: its
// start hint, given z's metadata.
func zIndexFirst(z, meta []byte) []byte { return append(zIndexPrefix(z), zsetHint(meta)...) }

// zAtOrAfter is the start of a walk of an index from start (nil: an
// empty range, nil), no earlier than first, the index's start hint.
func zAtOrAfter(start, first []byte) []byte {
	if start != nil && bytes.Compare(start, first) < 0 {
		return first
	}
	return start
}

func zMemberKey(z, m []byte) []byte { return append(append(fieldPrefix(z), zMemberTag), m...) }

// zIndexPrefix is the start of z's index; zIndexEnd its exclusive end.
func zIndexPrefix(z []byte) []byte { return append(fieldPrefix(z), zIndexTag) }
func zIndexEnd(z []byte) []byte    { return append(fieldPrefix(z), zIndexTag+1) }

// zSortKey maps a score to 8 bytes that sort as the scores do: -0 is 0
// (Redis compares them equal and then orders by member), a negative
// number has all its bits flipped, a positive one its sign bit.
func zSortKey(s float64) uint64 {
	if s == 0 {
		return 1 << 63
	}
	b := math.Float64bits(s)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

// zIndexAt is the index position of sort key k (the first entry with
// that score).
func zIndexAt(z []byte, k uint64) []byte { return binary.BigEndian.AppendUint64(zIndexPrefix(z), k) }

func zIndexKey(z, m []byte, s float64) []byte { return append(zIndexAt(z, zSortKey(s)), m...) }

func zScoreBytes(s float64) []byte { return binary.BigEndian.AppendUint64(nil, math.Float64bits(s)) }

func zScoreOf(v []byte) float64 { return math.Float64frombits(binary.BigEndian.Uint64(v)) }

// zEntry is one member of an index scan.
type zEntry struct {
	member []byte
	score  float64
}

func zEntryOf(z []byte, kv KeyValue) zEntry {
	return zEntry{member: kv.Key[len(zIndexPrefix(z))+8:], score: zScoreOf(kv.Value)}
}

// formatScore writes a score as Redis 7.0 replies it: %.17g, inf, -inf.
func formatScore(s float64) []byte {
	switch {
	case math.IsInf(s, 1):
		return []byte("inf")
	case math.IsInf(s, -1):
		return []byte("-inf")
	}
	return strconv.AppendFloat(nil, s, 'g', 17, 64)
}

// parseDouble reads s as C's strtod reads all of a string: decimal or
// hexadecimal (with or without a p exponent), inf and infinity in any
// case, no NaN. outOfRange: the number overflows (±Inf returned) or a
// nonzero number underflows to 0, which strtod reports as ERANGE.
func parseDouble(s string) (f float64, outOfRange, ok bool) {
	unsigned := strings.TrimLeft(s, "+-")
	if s == "" || len(s)-len(unsigned) > 1 || strings.Contains(s, "_") {
		return 0, false, false
	}
	switch strings.ToLower(unsigned) {
	case "inf", "infinity":
		if s[0] == '-' {
			return math.Inf(-1), false, true
		}
		return math.Inf(1), false, true
	case "nan":
		return 0, false, false
	}
	mant := unsigned
	hex := strings.HasPrefix(unsigned, "0x") || strings.HasPrefix(unsigned, "0X")
	if hex {
		if !strings.ContainsAny(unsigned, "pP") {
			s += "p0" // strtod's hexadecimal needs no exponent; Go's does
		}
		mant = unsigned[2:]
		if i := strings.IndexAny(mant, "pP"); i >= 0 {
			mant = mant[:i]
		}
	} else if i := strings.IndexAny(mant, "eE"); i >= 0 {
		mant = mant[:i]
	}
	f, err := strconv.ParseFloat(s, 64)
	if errors.Is(err, strconv.ErrRange) {
		return f, true, true
	}
	if err != nil {
		return 0, false, false
	}
	underflow := f == 0 && strings.Trim(mant, "0.") != ""
	return f, underflow, true
}

// parseScore reads a score or an increment as ZADD and ZINCRBY do; -0
// is 0, as Redis keeps it.
func parseScore(b []byte) (float64, bool) {
	s := string(b)
	if s != "" && strings.ContainsRune(" \t\n\v\f\r", rune(s[0])) {
		return 0, false
	}
	f, outOfRange, ok := parseDouble(s)
	return f + 0, ok && !outOfRange
}

// zScoreRange is a score range as ZRANGEBYSCORE takes it.
type zScoreRange struct {
	min, max     float64
	minEx, maxEx bool
}

// parseScoreBound reads one end of a score range as Redis does: an
// optional "(" (exclusive), then strtod's number, leading spaces allowed,
// out-of-range values taken as they come, and nothing (an empty string)
// as 0.
func parseScoreBound(b []byte) (f float64, ex, ok bool) {
	s := string(b)
	if strings.HasPrefix(s, "(") {
		ex, s = true, s[1:]
	}
	if s == "" {
		return 0, ex, true
	}
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	if t == "" {
		return 0, false, false
	}
	f, _, ok = parseDouble(t)
	return f, ex, ok
}

func parseScoreRange(min, max []byte) (zScoreRange, bool) {
	var r zScoreRange
	var ok1, ok2 bool
	r.min, r.minEx, ok1 = parseScoreBound(min)
	r.max, r.maxEx, ok2 = parseScoreBound(max)
	return r, ok1 && ok2
}

// span is r's key range in z's index.
func (r zScoreRange) span(z []byte) (start, end []byte) {
	lo, hi := zSortKey(r.min), zSortKey(r.max)
	if r.minEx {
		lo++
	}
	if !r.maxEx {
		hi++
	}
	if lo >= hi || r.min > r.max {
		return nil, nil
	}
	return zIndexAt(z, lo), zIndexAt(z, hi)
}

// zLexBound is one end of a lex range: "-" and "+" are the open ends.
type zLexBound struct {
	v         []byte
	ex        bool
	neg, plus bool
}

func parseLexBound(b []byte) (zLexBound, bool) {
	switch {
	case string(b) == "-":
		return zLexBound{neg: true}, true
	case string(b) == "+":
		return zLexBound{plus: true}, true
	case len(b) > 0 && b[0] == '(':
		return zLexBound{v: b[1:], ex: true}, true
	case len(b) > 0 && b[0] == '[':
		return zLexBound{v: b[1:]}, true
	}
	return zLexBound{}, false
}

// key is the bound's position among the members of score prefix p: the
// first key at or after the range's start (start) or its exclusive end.
func (l zLexBound) key(p []byte, start bool) []byte {
	switch {
	case l.neg:
		return p
	case l.plus:
		return binary.BigEndian.AppendUint64(p[:len(p)-8:len(p)-8], binary.BigEndian.Uint64(p[len(p)-8:])+1)
	case start == l.ex: // "(a" as a start, "[b" as an end: just past the member
		return append(append(p[:len(p):len(p)], l.v...), 0)
	}
	return append(p[:len(p):len(p)], l.v...)
}

// atOrBelow reports whether m is in the range above l, l its start.
func (l zLexBound) atOrBelow(m []byte) bool {
	c := bytes.Compare(m, l.v)
	return l.neg || (!l.plus && (c > 0 || (c == 0 && !l.ex)))
}

// atOrAbove reports whether m is in the range below l, l its end.
func (l zLexBound) atOrAbove(m []byte) bool {
	c := bytes.Compare(m, l.v)
	return l.plus || (!l.neg && (c < 0 || (c == 0 && !l.ex)))
}

// lexEmpty reports whether [lo, hi] holds no string at all, as Redis
// tells such a range ("-" below every string, "+" above).
func lexEmpty(lo, hi zLexBound) bool {
	rank := func(l zLexBound) int {
		switch {
		case l.neg:
			return -1
		case l.plus:
			return 1
		}
		return 0
	}
	c := rank(lo) - rank(hi)
	if c == 0 && rank(lo) == 0 {
		c = bytes.Compare(lo.v, hi.v)
		return c > 0 || (c == 0 && (lo.ex || hi.ex))
	}
	return c > 0
}
