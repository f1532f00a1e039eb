package mvcc

import (
	"errors"
	"fmt"
)

// Engine values. Every version's value starts with a two-byte header:
//
//	byte 0  format, 1 today. A reader refuses a format it does not know:
//	        data written by a newer binary stays on disk across a
//	        downgrade attempt, and guessing at it could return garbage.
//	byte 1  flags. Bit 0: tombstone (the version is a delete; nothing
//	        follows the header). Other bits are reserved and refused when
//	        set. A transaction's write intent will be bit 1, followed by
//	        the intent's record (transaction ID, epoch, the transaction
//	        record's key), length-prefixed, before the value; an old
//	        binary must refuse it rather than read a provisional value as
//	        committed, which is why unknown bits are errors, not ignored.
//	rest    the user's value.
const (
	formatV1      = 1
	flagTombstone = 1 << 0
	knownFlags    = flagTombstone
	headerLen     = 2
)

// ErrInvalidValue: a stored value whose header this binary cannot read.
var ErrInvalidValue = errors.New("mvcc: invalid versioned value")

// appendValue appends the stored form of a version's value to dst.
func appendValue(dst, value []byte, tombstone bool) []byte {
	if tombstone {
		return append(dst, formatV1, flagTombstone)
	}
	return append(append(dst, formatV1, 0), value...)
}

// decodeValue splits a stored value into the user's value (aliasing raw)
// and the tombstone flag.
func decodeValue(raw []byte) (value []byte, tombstone bool, err error) {
	if len(raw) < headerLen {
		return nil, false, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrInvalidValue, len(raw), headerLen)
	}
	if raw[0] != formatV1 {
		return nil, false, fmt.Errorf("%w: format %d, this binary reads format %d", ErrInvalidValue, raw[0], formatV1)
	}
	if f := raw[1]; f&^knownFlags != 0 {
		return nil, false, fmt.Errorf("%w: flags %#02x include bits this binary does not know (%#02x)", ErrInvalidValue, f, f&^knownFlags)
	}
	if raw[1]&flagTombstone != 0 {
		if len(raw) != headerLen {
			return nil, false, fmt.Errorf("%w: a tombstone carrying %d bytes of value", ErrInvalidValue, len(raw)-headerLen)
		}
		return nil, true, nil
	}
	return raw[headerLen:], false, nil
}
