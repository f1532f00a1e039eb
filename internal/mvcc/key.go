package mvcc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
)

// Engine keys. A version of user key k at timestamp t is stored under
//
//	escape(k) 0x00 0x01 ^encode(t)
//
// escape(k) is k with every 0x00 byte followed by 0xFF; 0x00 0x01 ends the
// user key; ^encode(t) is hlc's 12-byte encoding with every bit inverted.
// Under bytewise order:
//   - user keys keep their order: where two escaped keys first differ, the
//     bytes compare as the user keys' do (0x00 0xFF against a byte above
//     0x00, or the terminator 0x00 0x01 against a longer key's next byte,
//     which is above 0x00 or is an escaped 0x00 0xFF);
//   - a key's versions are contiguous: escape(k) 0x00 0x01 is a prefix of no
//     other key's encoding, since an escaped key never holds 0x00 0x01;
//   - newer versions come first, the timestamp being inverted.
//
// The engine orders bytes and nothing else, so the user key cannot simply
// be followed by the timestamp ("a" and "a\x00" would interleave).

const (
	escapeByte    = 0x00
	escapedZero   = 0xFF // 0x00 in a user key is stored as 0x00 0xFF
	terminator    = 0x01 // 0x00 0x01 ends the user key
	versionsLimit = 0x02 // escape(k) 0x00 0x02 is above every version of k
	// suffixLen is the bytes after the escaped user key.
	suffixLen = 2 + hlc.EncodedLen
)

// ErrInvalidKey: an engine key that is not a version's key.
var ErrInvalidKey = errors.New("mvcc: invalid versioned key")

// AppendKey appends the engine key of key's version at ts to dst.
func AppendKey(dst, key []byte, ts hlc.Timestamp) []byte {
	return appendInverted(appendPrefix(dst, key), ts)
}

// appendPrefix appends escape(key) 0x00 0x01: the key's versions all start
// with it, and it sorts before every one of them.
func appendPrefix(dst, key []byte) []byte {
	for {
		i := bytes.IndexByte(key, escapeByte)
		if i < 0 {
			return append(append(dst, key...), escapeByte, terminator)
		}
		dst = append(append(dst, key[:i+1]...), escapedZero)
		key = key[i+1:]
	}
}

func appendInverted(dst []byte, ts hlc.Timestamp) []byte {
	n := len(dst)
	dst = ts.AppendEncoded(dst)
	for i := n; i < len(dst); i++ {
		dst[i] = ^dst[i]
	}
	return dst
}

// appendVersionsEnd turns a prefix (escape(k) 0x00 0x01) into the bound
// just above k's versions, appended to dst.
func appendVersionsEnd(dst, prefix []byte) []byte {
	n := len(dst)
	dst = append(dst, prefix...)
	dst[n+len(prefix)-1] = versionsLimit
	return dst
}

// DecodeKey splits an engine key into its user key and timestamp. The user
// key aliases ek when k held no 0x00 byte, and is a copy otherwise.
func DecodeKey(ek []byte) (key []byte, ts hlc.Timestamp, err error) {
	esc, ts, err := splitKey(ek)
	if err != nil {
		return nil, hlc.Timestamp{}, err
	}
	if bytes.IndexByte(esc, escapeByte) < 0 {
		return esc, ts, nil
	}
	return appendUnescaped(make([]byte, 0, len(esc)), esc), ts, nil
}

// splitKey checks ek's form and returns its escaped user key and its
// timestamp.
func splitKey(ek []byte) (esc []byte, ts hlc.Timestamp, err error) {
	if len(ek) < suffixLen {
		return nil, ts, fmt.Errorf("%w: %q is %d bytes, shorter than the %d of a version suffix", ErrInvalidKey, ek, len(ek), suffixLen)
	}
	n := len(ek) - suffixLen
	esc = ek[:n]
	if ek[n] != escapeByte || ek[n+1] != terminator {
		return nil, ts, fmt.Errorf("%w: %q has no user-key terminator before its timestamp", ErrInvalidKey, ek)
	}
	for rest := esc; ; {
		i := bytes.IndexByte(rest, escapeByte)
		if i < 0 {
			break
		}
		if i+1 == len(rest) || rest[i+1] != escapedZero {
			return nil, ts, fmt.Errorf("%w: %q holds an unescaped 0x00 in its user key", ErrInvalidKey, ek)
		}
		rest = rest[i+2:]
	}
	return esc, versionTimestamp(ek), nil
}

// versionTimestamp reads the timestamp at the end of an engine key of at
// least suffixLen bytes. It undoes appendInverted in place of copying the
// bytes back for hlc.Decode: scans call it once or twice a key.
func versionTimestamp(ek []byte) hlc.Timestamp {
	b := ek[len(ek)-hlc.EncodedLen:]
	return hlc.Timestamp{
		WallTime: int64(^binary.BigEndian.Uint64(b) ^ (1 << 63)),
		Logical:  ^binary.BigEndian.Uint32(b[8:]),
	}
}

// appendUnescaped appends the user key of a well-formed escaped key.
func appendUnescaped(dst, esc []byte) []byte {
	for {
		i := bytes.IndexByte(esc, escapeByte)
		if i < 0 {
			return append(dst, esc...)
		}
		dst = append(dst, esc[:i+1]...)
		esc = esc[i+2:]
	}
}

// unescapedLen is the length of the user key of a well-formed escaped key.
func unescapedLen(esc []byte) int { return len(esc) - bytes.Count(esc, []byte{escapeByte}) }

// EngineSpan returns the engine bounds holding every version of every user
// key in [start, end), and the transaction records anchored there
// (intent.go): from start's records to end's. An empty end means no bound
// (nil hi): the span runs to the end of the engine, so a caller sharing the
// engine with other keys passes an end.
func EngineSpan(start, end []byte) (lo, hi []byte) {
	lo = recordsStart(start)
	if len(end) > 0 {
		hi = recordsStart(end)
	}
	return lo, hi
}

// recordsStart is escape(key) 0x00 0x00: below key's records and versions,
// above every smaller key's.
func recordsStart(key []byte) []byte {
	p := appendPrefix(nil, key)
	p[len(p)-1] = recordMark
	return p
}

// KeyGroups groups engine keys by user key for the memory engine's
// unordered indexes (memengine.Grouping), so that a read of a key's
// versions looks in one bucket rather than at every key. A key's group is
// its bytes up to and including the first 0x00 that escapes nothing (the
// end of its escaped user key), or all of it if there is none: every
// version of a user key, and its intents and transaction records, are one
// group. Keys of other layouts group by whatever prefix that rule gives,
// which is as good as any for placement.
type KeyGroups struct{}

func (KeyGroups) GroupLen(key []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(key[i:], escapeByte)
		if j < 0 {
			return len(key)
		}
		i += j
		if i+1 < len(key) && key[i+1] == escapedZero {
			i += 2
			continue
		}
		return i + 1
	}
}

// Within: when lower's group g ends in its 0x00 and upper is g followed by
// a byte below 0xFF, every key of [lower, upper) is g followed by nothing
// or by a byte below 0xFF, so its first free 0x00 is g's. A key's versions,
// [escape(k) 0x00 0x01 ..., escape(k) 0x00 0x02), are such a span.
func (g KeyGroups) Within(lower, upper []byte) bool {
	n := g.GroupLen(lower)
	return n > 0 && lower[n-1] == escapeByte && len(upper) > n && bytes.HasPrefix(upper, lower[:n]) && upper[n] != escapedZero
}
