package resp

import (
	"strconv"
)

// RESP3 (HELLO 3). A connection speaks RESP2 until HELLO 3 and then
// RESP3, whose replies carry their types: maps (HGETALL, CONFIG GET,
// HELLO, COMMAND DOCS), sets (SMEMBERS, SINTER/SUNION/SDIFF, SPOP with a
// count, COMMAND INFO's flags), doubles (scores), one null for a missing
// value and a missing array, verbatim text (INFO, CLIENT INFO/LIST), and
// a member with its score as a pair of its own (ZRANGE ... WITHSCORES,
// HRANDFIELD ... WITHVALUES). Each command writes the same reply through
// the helpers below in both protocols; which bytes they write is the
// connection's protocol, so every command answers as Redis 7.0 does in
// either. output.go writes RESP2's types; the RESP3 ones are written here.

// writeMap starts a map of n pairs: RESP2 a flat array of 2n.
func (x *call) writeMap(n int) { x.header('%', n, 2*n) }

// writeSet starts a set of n members: RESP2 an array.
func (x *call) writeSet(n int) { x.header('~', n, n) }

// writePairs starts n pairs (a member and its score, a field and its
// value), each then started by writePair: RESP3 an array of two-element
// arrays, RESP2 one flat array of 2n.
func (x *call) writePairs(n int) {
	if x.st.resp3 {
		x.c.WriteArray(n)
	} else {
		x.c.WriteArray(2 * n)
	}
}

// writePair starts one pair of writePairs.
func (x *call) writePair() {
	if x.st.resp3 {
		x.c.WriteArray(2)
	}
}

// writeScore writes a score: a RESP3 double, a RESP2 bulk string, in
// Redis 7.0's text (formatScore) either way.
func (x *call) writeScore(s float64) {
	if !x.st.resp3 {
		x.c.WriteBulk(formatScore(s))
		return
	}
	b := append([]byte{','}, formatScore(s)...)
	x.c.WriteRaw(append(b, '\r', '\n'))
}

// writeVerbatim writes text (INFO, CLIENT INFO): a RESP3 verbatim string
// of format txt, a RESP2 bulk string.
func (x *call) writeVerbatim(text string) {
	if !x.st.resp3 {
		x.c.WriteBulkString(text)
		return
	}
	b := strconv.AppendInt([]byte{'='}, int64(len(text)+4), 10)
	b = append(b, "\r\ntxt:"...)
	x.c.WriteRaw(append(append(b, text...), '\r', '\n'))
}

// header writes an aggregate's header: RESP3 type t with n elements, RESP2
// an array of n2.
func (x *call) header(t byte, n, n2 int) {
	if !x.st.resp3 {
		x.c.WriteArray(n2)
		return
	}
	b := strconv.AppendInt([]byte{t}, int64(n), 10)
	x.c.WriteRaw(append(b, '\r', '\n'))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// resp3Null is RESP3's null, for a missing value and a missing array
// alike (RESP2's $-1 and *-1).
var resp3Null = []byte("_\r\n")

// appendNull appends the null bulk string of the protocol.
func appendNull(b []byte, resp3 bool) []byte {
	if resp3 {
		return append(b, resp3Null...)
	}
	return append(b, "$-1\r\n"...)
}

// appendArray appends an array header; a negative count is the null
// array.
func appendArray(b []byte, n int, resp3 bool) []byte {
	if n < 0 && resp3 {
		return append(b, resp3Null...)
	}
	return appendInt(b, '*', int64(n))
}
