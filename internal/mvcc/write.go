package mvcc

import (
	"fmt"

	"github.com/tidekv/tidekv/internal/hlc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Put writes key's version at ts holding value. A version already at ts is
// replaced; versions at other timestamps stay. Whether a write at ts is
// allowed at all (below a newer version, below the GC threshold or a
// closed timestamp) is the caller's decision: this layer stores versions.
func Put(w storage.Writer, key []byte, ts hlc.Timestamp, value []byte) error {
	return write(w, key, ts, value, false)
}

// Delete writes a tombstone for key at ts: reads at or above ts find no
// value, reads below it still see the older versions.
func Delete(w storage.Writer, key []byte, ts hlc.Timestamp) error {
	return write(w, key, ts, nil, true)
}

func write(w storage.Writer, key []byte, ts hlc.Timestamp, value []byte, tombstone bool) error {
	if ts.IsZero() {
		return fmt.Errorf("%w: a version of %q needs a timestamp, got zero", ErrInvalidArgument, key)
	}
	b := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(b)
	buf := AppendKey((*b)[:0], key, ts)
	n := len(buf)
	buf = appendValue(buf, value, tombstone)
	*b = buf
	// Writers copy their arguments, so the pooled buffer is free again on
	// return.
	return w.Set(buf[:n], buf[n:])
}
