package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/storage"
)

// ErrInvalidArgument: a read or write the caller should not have asked for.
var ErrInvalidArgument = errors.New("mvcc: invalid argument")

// Version is what a read at a timestamp finds for one key: the newest
// version at or below that timestamp.
type Version struct {
	// Timestamp is the version's; zero when the key has no version at or
	// below the read timestamp.
	Timestamp hlc.Timestamp
	// Value is the user's value, a copy the caller may keep; nil for a
	// tombstone.
	Value []byte
	// Tombstone: the version is a delete, so the read finds no value.
	Tombstone bool
	// ExpiresAt is when the value expires, HLC wall time in nanoseconds;
	// 0: never.
	ExpiresAt int64
	// Txn is the ID of the transaction whose intent the version is (a
	// copy); nil for a committed version.
	Txn []byte
}

// Found reports whether the version holds a value, expired or not.
func (v Version) Found() bool { return !v.Timestamp.IsZero() && !v.Tombstone }

// LiveAt reports whether a read at wall time now sees the value: it is
// found and has not expired.
func (v Version) LiveAt(now int64) bool { return v.Found() && !expired(v.ExpiresAt, now) }

// keyBufs holds engine-key buffers, so a point read's only allocation is
// the value it returns (engines copy bounds and written keys).
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

// Get returns the newest version of key at or below ts: the first engine
// key at or after the version at ts itself, within the key's versions. An
// expiring version is returned as it is, expired or not: the caller, which
// may need its timestamp either way, asks LiveAt whether it is seen. On
// a reader that can find it without an iterator (storage.FirstGetter:
// Pebble) the value's copy is the only allocation.
func Get(r storage.Reader, key []byte, ts hlc.Timestamp) (Version, error) {
	b := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(b)
	buf := AppendKey((*b)[:0], key, ts)
	n := len(buf)
	buf = appendVersionsEnd(buf, buf[:n-hlc.EncodedLen])
	// Room for the key found, which is as long as the seek key.
	buf = slices.Grow(buf, n)
	*b = buf
	seek, end := buf[:n], buf[n:]
	if fg, ok := r.(storage.FirstGetter); ok {
		k, raw, found, err := fg.GetFirst(seek, end, buf[len(buf):])
		if err != nil || !found {
			return Version{}, err
		}
		val, tomb, err := decodeValue(raw)
		if err != nil {
			return Version{}, fmt.Errorf("%w (key %q)", err, k)
		}
		return Version{Timestamp: versionTimestamp(k), Value: val, Tombstone: tomb, ExpiresAt: expiresAt(raw), Txn: cloneTxn(raw)}, nil
	}
	it, err := r.NewIter(seek, end)
	if err != nil {
		return Version{}, err
	}
	var v Version
	if it.First() {
		v, err = readVersion(it)
	}
	return v, errors.Join(err, it.Close())
}

// readVersion decodes the version the iterator is on, copying its value.
func readVersion(it storage.Iterator) (Version, error) {
	val, tomb, err := decodeValue(it.Value())
	if err != nil {
		return Version{}, fmt.Errorf("%w (key %q)", err, it.Key())
	}
	v := Version{Timestamp: versionTimestamp(it.Key()), Tombstone: tomb, ExpiresAt: expiresAt(it.Value()), Txn: cloneTxn(it.Value())}
	if !tomb {
		v.Value = append(make([]byte, 0, len(val)), val...)
	}
	return v, nil
}

// cloneTxn copies an accepted value's intent transaction ID (nil if none).
func cloneTxn(raw []byte) []byte {
	if txn := intentTxn(raw); txn != nil {
		return append([]byte(nil), txn...)
	}
	return nil
}

// KeyValue is one key a scan found, with the version it read.
type KeyValue struct {
	Key, Value []byte
	Timestamp  hlc.Timestamp
	ExpiresAt  int64 // as in Version
}

// Scan reads the keys in [start, end) (empty end: no bound) as of ts, in
// order, skipping keys whose newest version at or below ts is a tombstone
// or that have none. It stops before a key once it holds limit keys or
// maxBytes bytes of keys and values (so it returns at least one key if any
// exists) and returns that key as resume, where the caller continues; resume
// is nil when the span is done. Each returned key and value share one
// allocation.
//
// A key whose value expired at or before ts's wall time is skipped too.
// A key whose newest version at or below ts is an intent stops the scan
// with an *IntentError: the caller resolves it and scans again.
//
// A key's versions newer than ts are skipped by one seek, not stepped
// through; after the version read, one step reaches the next key when the
// key had no older version, else one seek passes them all.
func Scan(r storage.Reader, start, end []byte, ts hlc.Timestamp, limit, maxBytes int) (kvs []KeyValue, resume []byte, err error) {
	return scan(r, start, end, ts, ts.WallTime, limit, maxBytes)
}

// ScanNewest is Scan of every key's newest version, whatever its
// timestamp, skipping values expired at wall time now: a read at "latest"
// whose reader judges expiry by its own clock.
func ScanNewest(r storage.Reader, start, end []byte, now int64, limit, maxBytes int) (kvs []KeyValue, resume []byte, err error) {
	return scan(r, start, end, hlc.MaxTimestamp, now, limit, maxBytes)
}

func scan(r storage.Reader, start, end []byte, ts hlc.Timestamp, now int64, limit, maxBytes int) (kvs []KeyValue, resume []byte, err error) {
	if limit <= 0 || maxBytes <= 0 {
		return nil, nil, fmt.Errorf("%w: a scan's key limit and byte budget must be positive, got %d and %d", ErrInvalidArgument, limit, maxBytes)
	}
	lo, hi := EngineSpan(start, end)
	it, err := r.NewIter(lo, hi)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err = errors.Join(err, it.Close()); err != nil {
			kvs, resume = nil, nil
		}
	}()
	c := cursor{it: it}
	size := 0
	for ok := it.First(); ok; {
		if ok, err = c.enterKey(); err != nil || !ok {
			return kvs, nil, err
		}
		if len(kvs) >= limit || size >= maxBytes {
			return kvs, appendUnescaped(nil, c.esc()), nil
		}
		if !c.seekVisible(ts) {
			ok = it.Valid()
			continue
		}
		val, tomb, err := decodeValue(it.Value())
		if err != nil {
			return nil, nil, fmt.Errorf("%w (key %q)", err, it.Key())
		}
		if txn := intentTxn(it.Value()); txn != nil {
			return nil, nil, &IntentError{Key: appendUnescaped(nil, c.esc()), Txn: append([]byte(nil), txn...), Timestamp: versionTimestamp(it.Key())}
		}
		if exp := expiresAt(it.Value()); !tomb && !expired(exp, now) {
			esc := c.esc()
			buf := appendUnescaped(make([]byte, 0, unescapedLen(esc)+len(val)), esc)
			k := len(buf)
			buf = append(buf, val...)
			kvs = append(kvs, KeyValue{Key: buf[:k:k], Value: buf[k:], Timestamp: versionTimestamp(it.Key()), ExpiresAt: exp})
			size += len(buf)
		}
		ok = c.nextKey()
	}
	return kvs, nil, nil
}

// cursor walks an iterator over versioned keys one user key at a time.
type cursor struct {
	it storage.Iterator
	// prefix is the current user key's escape(k) 0x00 0x01, copied out of
	// the iterator, which may reuse its key buffer on the next move.
	prefix []byte
	seek   []byte // scratch for seek keys
	// onRecord, when set, sees each transaction record stepped past (one
	// by one rather than one seek past an anchor's records).
	onRecord func(key, value []byte)
}

// enterKey records the user key of the version the iterator is on, first
// stepping past transaction records (intent.go); false: none is left.
func (c *cursor) enterKey() (bool, error) {
	for c.it.Valid() {
		ek := c.it.Key()
		if seek, ok := recordAnchorEnd(ek); ok {
			if c.onRecord != nil {
				c.onRecord(ek, c.it.Value())
				c.it.Next()
				continue
			}
			c.it.SeekGE(seek)
			continue
		}
		if _, _, err := splitKey(ek); err != nil {
			return false, err
		}
		c.prefix = append(c.prefix[:0], ek[:len(ek)-hlc.EncodedLen]...)
		return true, nil
	}
	return false, nil
}

// esc is the current user key, escaped.
func (c *cursor) esc() []byte { return c.prefix[:len(c.prefix)-2] }

// inKey reports whether the iterator is on a version of the current key.
// A key of another length is not one, so enterKey checks its form.
func (c *cursor) inKey() bool {
	k := c.it.Key()
	return c.it.Valid() && len(k) == len(c.prefix)+hlc.EncodedLen && bytes.HasPrefix(k, c.prefix)
}

// seekVisible moves from the current key's newest version to its newest
// version at or below ts, if any; false leaves the iterator on the next key
// (or invalid).
func (c *cursor) seekVisible(ts hlc.Timestamp) bool {
	if !ts.Less(versionTimestamp(c.it.Key())) {
		return true
	}
	c.seek = appendInverted(append(c.seek[:0], c.prefix...), ts)
	c.it.SeekGE(c.seek)
	return c.inKey()
}

// nextKey moves past the current key's remaining versions: one step when
// it has none, else one seek.
func (c *cursor) nextKey() bool {
	if c.it.Next() && c.inKey() {
		c.seek = appendVersionsEnd(c.seek[:0], c.prefix)
		return c.it.SeekGE(c.seek)
	}
	return c.it.Valid()
}
