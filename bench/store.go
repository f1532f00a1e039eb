package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
)

// Store is the key-value surface the benchmark drives. Implementations must
// be safe for concurrent use and must not retain key or value slices after
// a call returns: the benchmark reuses its buffers. Returned values belong
// to the benchmark.
type Store interface {
	// Get returns the value stored under key; found is false, with a nil
	// error, when there is none.
	Get(ctx context.Context, key []byte) (value []byte, found bool, err error)
	// Put stores value under key.
	Put(ctx context.Context, key, value []byte) error
	// Scan reads the keys >= start in order, at most limit of them, and
	// returns how many it read.
	Scan(ctx context.Context, start []byte, limit int) (n int, err error)
}

// keyPrefix is YCSB's default key prefix.
const keyPrefix = "user"

// appendKey appends the key of record number n to dst: "user" followed by
// the decimal FNV hash of n (YCSB's insertorder=hashed, zero padding 1).
func appendKey(dst []byte, n int64) []byte {
	dst = append(dst, keyPrefix...)
	return strconv.AppendInt(dst, fnvHash64(n), 10)
}

// errBadRecord reports a value that is not an encoded record.
var errBadRecord = errors.New("bench: malformed record")

// A record is a sequence of fields, each a uvarint length followed by that
// many bytes. Field names are implied by position (YCSB's field0..fieldN).

// appendField appends one encoded field to dst.
func appendField(dst, field []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(field)))
	return append(dst, field...)
}

// decodeRecord splits an encoded record into fields, appending to fields
// (sub-slices of v, not copies).
func decodeRecord(fields [][]byte, v []byte) ([][]byte, error) {
	for len(v) > 0 {
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return fields, errBadRecord
		}
		v = v[w:]
		fields = append(fields, v[:n:n])
		v = v[n:]
	}
	return fields, nil
}
