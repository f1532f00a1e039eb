package mvcc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Engine values. Every version's value starts with a two-byte header:
//
//	byte 0  format, 1 today. A reader refuses a format it does not know:
//	        data written by a newer binary stays on disk across a
//	        downgrade attempt, and guessing at it could return garbage.
//	byte 1  flags. Bit 0: tombstone (the version is a delete; nothing
//	        follows the header but an intent's ID). Bit 1: intent (the
//	        version is a transaction's provisional write, not committed:
//	        a uvarint length and the transaction's reference, opaque to
//	        this package, follow the header; intent.go). Bit 2: expires (an 8-byte big-endian expiry
//	        follows, after an intent's ID: HLC wall time in nanoseconds,
//	        positive; never on a tombstone). Other bits are reserved and
//	        refused when set: an old binary must refuse an intent rather
//	        than read a provisional value as committed, which is why
//	        unknown bits are errors, not ignored (an old binary refusing
//	        an expiring value, rather than serving it forever, is the same
//	        rule).
//	rest    the user's value.
const (
	formatV1      = 1
	flagTombstone = 1 << 0
	flagIntent    = 1 << 1
	flagExpires   = 1 << 2
	knownFlags    = flagTombstone | flagIntent | flagExpires
	headerLen     = 2
	expiryLen     = 8
)

// ErrInvalidValue: a stored value whose header this binary cannot read.
var ErrInvalidValue = errors.New("mvcc: invalid versioned value")

// appendValue appends the stored form of a version's value to dst;
// expiresAt 0 means the value does not expire, an empty txn that the
// version is committed.
func appendValue(dst, value []byte, expiresAt int64, tombstone bool, txn []byte) []byte {
	var f byte
	if tombstone {
		f |= flagTombstone
	}
	if len(txn) > 0 {
		f |= flagIntent
	}
	if expiresAt != 0 && !tombstone {
		f |= flagExpires
	}
	dst = append(dst, formatV1, f)
	if len(txn) > 0 {
		dst = append(binary.AppendUvarint(dst, uint64(len(txn))), txn...)
	}
	if tombstone {
		return dst
	}
	if expiresAt != 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(expiresAt))
	}
	return append(dst, value...)
}

// decodeValue splits a stored value into the user's value (aliasing raw)
// and the tombstone flag; expiresAt and intentTxn read the expiry and the
// intent's transaction of a value it accepted.
func decodeValue(raw []byte) (value []byte, tombstone bool, err error) {
	if len(raw) < headerLen {
		return nil, false, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrInvalidValue, len(raw), headerLen)
	}
	if raw[0] != formatV1 {
		return nil, false, fmt.Errorf("%w: format %d, this binary reads format %d", ErrInvalidValue, raw[0], formatV1)
	}
	f := raw[1]
	if f&^knownFlags != 0 {
		return nil, false, fmt.Errorf("%w: flags %#02x include bits this binary does not know (%#02x)", ErrInvalidValue, f, f&^knownFlags)
	}
	body := headerLen
	if f&flagIntent != 0 {
		f := intentField(raw)
		if f == nil {
			return nil, false, fmt.Errorf("%w: an intent without its transaction", ErrInvalidValue)
		}
		body += len(f)
	}
	if f&flagTombstone != 0 {
		if f&flagExpires != 0 {
			return nil, false, fmt.Errorf("%w: a tombstone with an expiry", ErrInvalidValue)
		}
		if len(raw) != body {
			return nil, false, fmt.Errorf("%w: a tombstone carrying %d bytes of value", ErrInvalidValue, len(raw)-body)
		}
		return nil, true, nil
	}
	if f&flagExpires == 0 {
		return raw[body:], false, nil
	}
	if len(raw) < body+expiryLen {
		return nil, false, fmt.Errorf("%w: an expiring value of %d bytes, shorter than its expiry", ErrInvalidValue, len(raw))
	}
	if expiresAt(raw) <= 0 {
		return nil, false, fmt.Errorf("%w: expiry %d is not positive", ErrInvalidValue, expiresAt(raw))
	}
	return raw[body+expiryLen:], false, nil
}

// expiresAt is the expiry of a stored value decodeValue accepted (0: it
// does not expire).
func expiresAt(raw []byte) int64 {
	if raw[1]&flagExpires == 0 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(raw[headerLen+len(intentField(raw)):]))
}

// intentField is the length and transaction of a value's intent, nil for
// a committed version or an intent whose transaction is missing or cut.
func intentField(raw []byte) []byte {
	if raw[1]&flagIntent == 0 {
		return nil
	}
	n, w := binary.Uvarint(raw[headerLen:])
	// A length in more bytes than it needs would not store back the same.
	if w <= 0 || n == 0 || n > uint64(len(raw)-headerLen-w) || w != len(binary.AppendUvarint(nil, n)) {
		return nil
	}
	return raw[headerLen : headerLen+w+int(n)]
}

// intentTxn is the transaction of an accepted value's intent (aliasing
// raw), nil for a committed version.
func intentTxn(raw []byte) []byte {
	if f := intentField(raw); f != nil {
		_, w := binary.Uvarint(f)
		return f[w:]
	}
	return nil
}

// expired reports whether a value expiring at expiresAt (0: never) is gone
// at wall time now: expiry is inclusive, so every reader at one time
// agrees.
func expired(expiresAt, now int64) bool { return expiresAt != 0 && expiresAt <= now }
