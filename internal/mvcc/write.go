package mvcc

import (
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Put writes key's version at ts holding value. A version already at ts is
// replaced; versions at other timestamps stay. Whether a write at ts is
// allowed at all (below a newer version, below the GC threshold or a
// closed timestamp) is the caller's decision: this layer stores versions.
func Put(w storage.Writer, key []byte, ts hlc.Timestamp, value []byte) error {
	return write(w, key, ts, value, 0, false, nil)
}

// PutExpiring is Put of a value that expires at expiresAt, an HLC wall time
// in nanoseconds (0: never): a read at or after it finds no value, as if
// the version were a tombstone. The version stays stored until GC removes
// it.
func PutExpiring(w storage.Writer, key []byte, ts hlc.Timestamp, value []byte, expiresAt int64) error {
	if expiresAt < 0 {
		return fmt.Errorf("%w: an expiry of %q must not be negative, got %d", ErrInvalidArgument, key, expiresAt)
	}
	return write(w, key, ts, value, expiresAt, false, nil)
}

// Delete writes a tombstone for key at ts: reads at or above ts find no
// value, reads below it still see the older versions.
func Delete(w storage.Writer, key []byte, ts hlc.Timestamp) error {
	return write(w, key, ts, nil, 0, true, nil)
}

func write(w storage.Writer, key []byte, ts hlc.Timestamp, value []byte, expiresAt int64, tombstone bool, txn []byte) error {
	if ts.IsZero() {
		return fmt.Errorf("%w: a version of %q needs a timestamp, got zero", ErrInvalidArgument, key)
	}
	b := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(b)
	buf := AppendKey((*b)[:0], key, ts)
	n := len(buf)
	buf = appendValue(buf, value, expiresAt, tombstone, txn)
	*b = buf
	// Writers copy their arguments, so the pooled buffer is free again on
	// return.
	return w.Set(buf[:n], buf[n:])
}
