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
//	        follows the header). Bit 2: expires (an 8-byte big-endian
//	        expiry follows the header: HLC wall time in nanoseconds,
//	        positive; never on a tombstone). Other bits are reserved and
//	        refused when set. A transaction's write intent will be bit 1,
//	        followed by the intent's record (transaction ID, epoch, the
//	        transaction record's key), length-prefixed, before the value;
//	        an old binary must refuse it rather than read a provisional
//	        value as committed, which is why unknown bits are errors, not
//	        ignored (an old binary refusing an expiring value, rather than
//	        serving it forever, is the same rule).
//	rest    the user's value.
const (
	formatV1      = 1
	flagTombstone = 1 << 0
	flagExpires   = 1 << 2
	knownFlags    = flagTombstone | flagExpires
	headerLen     = 2
	expiryLen     = 8
)

// ErrInvalidValue: a stored value whose header this binary cannot read.
var ErrInvalidValue = errors.New("mvcc: invalid versioned value")

// appendValue appends the stored form of a version's value to dst;
// expiresAt 0 means the value does not expire.
func appendValue(dst, value []byte, expiresAt int64, tombstone bool) []byte {
	if tombstone {
		return append(dst, formatV1, flagTombstone)
	}
	if expiresAt != 0 {
		dst = binary.BigEndian.AppendUint64(append(dst, formatV1, flagExpires), uint64(expiresAt))
		return append(dst, value...)
	}
	return append(append(dst, formatV1, 0), value...)
}

// decodeValue splits a stored value into the user's value (aliasing raw)
// and the tombstone flag; expiresAt reads the expiry of a value it
// accepted.
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
	if f&flagTombstone != 0 {
		if f&flagExpires != 0 {
			return nil, false, fmt.Errorf("%w: a tombstone with an expiry", ErrInvalidValue)
		}
		if len(raw) != headerLen {
			return nil, false, fmt.Errorf("%w: a tombstone carrying %d bytes of value", ErrInvalidValue, len(raw)-headerLen)
		}
		return nil, true, nil
	}
	if f&flagExpires == 0 {
		return raw[headerLen:], false, nil
	}
	if len(raw) < headerLen+expiryLen {
		return nil, false, fmt.Errorf("%w: an expiring value of %d bytes, shorter than its expiry", ErrInvalidValue, len(raw))
	}
	if expiresAt(raw) <= 0 {
		return nil, false, fmt.Errorf("%w: expiry %d is not positive", ErrInvalidValue, expiresAt(raw))
	}
	return raw[headerLen+expiryLen:], false, nil
}

// expiresAt is the expiry of a stored value decodeValue accepted (0: it
// does not expire).
func expiresAt(raw []byte) int64 {
	if raw[1]&flagExpires == 0 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(raw[headerLen:]))
}

// expired reports whether a value expiring at expiresAt (0: never) is gone
// at wall time now: expiry is inclusive, so every reader at one time
// agrees.
func expired(expiresAt, now int64) bool { return expiresAt != 0 && expiresAt <= now }
