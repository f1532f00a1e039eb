package mvcc

import (
	"errors"
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/storage"
)

// ChangeOptions is what FirstChange counts besides versions written in
// (from, to].
type ChangeOptions struct {
	// Own reports whether an intent's transaction (as stored) is the one
	// refreshing (nil: none is): what that transaction read is the
	// version below its own intent, so FirstChange judges that one.
	Own func(txn []byte) bool
	// Expiry: a value live at from that expired at or before to is a
	// change, since a read at to no longer finds it.
	Expiry bool
}

// FirstChange finds the first key in [start, end) (empty end: no bound)
// that a read at to sees differently from a read at from: its newest
// version at or below to is above from (a write, a delete, or a key that
// appeared), or, with o.Expiry, is a value live at from that expired at
// or before to (at is then its expiry). That is what a transaction that
// scanned the span at from must not have missed to commit at to. It
// returns nil when there is none, and an *IntentError for a key whose
// newest version at or below to is an intent not o.Own, whose outcome
// nobody knows yet. Per key it reads the newest version, and seeks only
// when that is above to.
func FirstChange(r storage.Reader, start, end []byte, from, to hlc.Timestamp, o ChangeOptions) (key []byte, at hlc.Timestamp, err error) {
	lo, hi := EngineSpan(start, end)
	it, err := r.NewIter(lo, hi)
	if err != nil {
		return nil, at, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	c := cursor{it: it}
	for ok := it.First(); ok; {
		if ok, err = c.enterKey(); err != nil || !ok {
			return nil, at, err
		}
		newest := versionTimestamp(it.Key())
		if !c.seekVisible(to) {
			ok = it.Valid() // on the next key already
			continue
		}
		if txn := intentTxn(it.Value()); txn != nil && o.Own != nil && o.Own(txn) {
			if !it.Next() || !c.inKey() {
				ok = it.Valid() // the transaction created the key
				continue
			}
		}
		ts := versionTimestamp(it.Key())
		if txn := intentTxn(it.Value()); txn != nil {
			if !from.Less(newest) {
				// Nothing was written above from: the scan at from saw
				// this key as it is now.
				ok = c.nextKey()
				continue
			}
			return nil, at, &IntentError{Key: appendUnescaped(nil, c.esc()), Txn: append([]byte(nil), txn...), Timestamp: ts}
		}
		if from.Less(ts) {
			return appendUnescaped(nil, c.esc()), ts, nil
		}
		if o.Expiry {
			if _, _, err := decodeValue(it.Value()); err != nil {
				return nil, at, fmt.Errorf("%w (key %q)", err, it.Key())
			}
			if exp := expiresAt(it.Value()); expiredWithin(exp, from, to) {
				return appendUnescaped(nil, c.esc()), hlc.Timestamp{WallTime: exp}, nil
			}
		}
		ok = c.nextKey()
	}
	return nil, at, nil
}

// ExpiredWithin reports whether the version is a value that a read at
// from finds and a read at to does not, because it expired in between.
func (v Version) ExpiredWithin(from, to hlc.Timestamp) bool {
	return v.Found() && expiredWithin(v.ExpiresAt, from, to)
}

func expiredWithin(expiresAt int64, from, to hlc.Timestamp) bool {
	return !expired(expiresAt, from.WallTime) && expired(expiresAt, to.WallTime)
}
