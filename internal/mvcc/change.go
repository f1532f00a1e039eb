package mvcc

import (
	"errors"

	"github.com/tidekv/tidekv/internal/hlc"
	"github.com/tidekv/tidekv/internal/storage"
)

// FirstChange finds the first key in [start, end) (empty end: no bound)
// whose newest version at or below to is above from: what a transaction
// that scanned the span at from must not have missed to commit at to (a
// write, a delete, or a key that appeared). It returns nil when there is
// none, and an *IntentError for a key whose newest version at or below to
// is an intent, whose outcome nobody knows yet. Per key it reads the
// newest version, and seeks only when that is above to.
func FirstChange(r storage.Reader, start, end []byte, from, to hlc.Timestamp) (key []byte, at hlc.Timestamp, err error) {
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
		if !from.Less(versionTimestamp(it.Key())) {
			ok = c.nextKey() // nothing above from
			continue
		}
		if !c.seekVisible(to) {
			ok = it.Valid() // on the next key already
			continue
		}
		ts := versionTimestamp(it.Key())
		if txn := intentTxn(it.Value()); txn != nil {
			return nil, at, &IntentError{Key: appendUnescaped(nil, c.esc()), Txn: append([]byte(nil), txn...), Timestamp: ts}
		}
		if from.Less(ts) {
			return appendUnescaped(nil, c.esc()), ts, nil
		}
		ok = c.nextKey()
	}
	return nil, at, nil
}
