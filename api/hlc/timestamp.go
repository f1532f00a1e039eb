package hlc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Timestamp is a point in hybrid logical time. The zero value is below
// every timestamp a Clock hands out and means "none".
type Timestamp struct {
	// WallTime is nanoseconds since the Unix epoch.
	WallTime int64
	// Logical orders events within one WallTime.
	Logical uint32
}

// MaxTimestamp is above every timestamp a Clock hands out: a read at it
// sees the newest version of everything.
var MaxTimestamp = Timestamp{WallTime: math.MaxInt64, Logical: math.MaxUint32}

// EncodedLen is the size of a Timestamp's binary encoding.
const EncodedLen = 12

// ErrInvalidTimestamp: an encoded or textual timestamp that does not parse.
var ErrInvalidTimestamp = errors.New("hlc: invalid timestamp")

// IsZero reports whether t is the zero timestamp.
func (t Timestamp) IsZero() bool { return t == Timestamp{} }

// Compare returns -1, 0 or +1 as t is before, equal to or after u.
func (t Timestamp) Compare(u Timestamp) int {
	switch {
	case t.WallTime < u.WallTime:
		return -1
	case t.WallTime > u.WallTime:
		return 1
	case t.Logical < u.Logical:
		return -1
	case t.Logical > u.Logical:
		return 1
	}
	return 0
}

// Less reports whether t is before u.
func (t Timestamp) Less(u Timestamp) bool { return t.Compare(u) < 0 }

// Next is the smallest timestamp after t, which must be below MaxTimestamp
// (no clock reaches it: Update refuses anything that far ahead). When the logical counter is full
// the wall time moves on by a nanosecond instead: the clock then runs that
// much ahead of physical time, which is harmless, where wrapping the
// counter would go back in time.
func (t Timestamp) Next() Timestamp {
	if t.Logical == math.MaxUint32 {
		return Timestamp{WallTime: t.WallTime + 1}
	}
	return Timestamp{WallTime: t.WallTime, Logical: t.Logical + 1}
}

// AppendEncoded appends t's 12-byte encoding to dst: the wall time big
// endian with its sign bit flipped (so negative times sort first), then the
// logical counter big endian. Encodings compare bytewise as the timestamps
// do.
func (t Timestamp) AppendEncoded(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.WallTime)^(1<<63))
	return binary.BigEndian.AppendUint32(dst, t.Logical)
}

// Decode reads a timestamp's 12-byte encoding.
func Decode(b []byte) (Timestamp, error) {
	if len(b) != EncodedLen {
		return Timestamp{}, fmt.Errorf("%w: encoding of %d bytes, want %d", ErrInvalidTimestamp, len(b), EncodedLen)
	}
	return Timestamp{
		WallTime: int64(binary.BigEndian.Uint64(b) ^ (1 << 63)),
		Logical:  binary.BigEndian.Uint32(b[8:]),
	}, nil
}

// String renders t as "<seconds>.<nanoseconds, 9 digits>,<logical>",
// e.g. "1700000000.000000123,4"; Parse reads it back.
func (t Timestamp) String() string {
	sec, nsec := t.WallTime/1e9, t.WallTime%1e9
	sign := ""
	if t.WallTime < 0 {
		sign, sec, nsec = "-", -sec, -nsec
	}
	return fmt.Sprintf("%s%d.%09d,%d", sign, sec, nsec, t.Logical)
}

// Parse reads the text form String writes.
func Parse(s string) (Timestamp, error) {
	bad := func(why string) (Timestamp, error) {
		return Timestamp{}, fmt.Errorf("%w: %q %s, want <seconds>.<9-digit nanoseconds>,<logical>", ErrInvalidTimestamp, s, why)
	}
	wall, logical, ok := strings.Cut(s, ",")
	if !ok {
		return bad("has no logical part")
	}
	neg := strings.HasPrefix(wall, "-")
	secs, nanos, ok := strings.Cut(strings.TrimPrefix(wall, "-"), ".")
	if !ok || len(nanos) != 9 {
		return bad("has a malformed wall time")
	}
	sec, err1 := strconv.ParseUint(secs, 10, 64)
	nsec, err2 := strconv.ParseUint(nanos, 10, 32)
	l, err3 := strconv.ParseUint(logical, 10, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return bad("has a malformed number")
	}
	// In magnitude, a wall time reaches 2^63 nanoseconds before the epoch
	// and 2^63-1 after it.
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if sec > (limit-nsec)/1e9 {
		return bad("is out of range")
	}
	w := int64(sec*1e9 + nsec) // wraps to MinInt64 for exactly 2^63, as wanted
	if neg {
		w = -w
	}
	return Timestamp{WallTime: w, Logical: uint32(l)}, nil
}
