package mvcc

import (
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/storage"
)

// GCStats says what one GC call did.
type GCStats struct {
	Keys     int   // user keys examined
	Versions int   // versions removed, tombstones included
	Bytes    int64 // their engine key and value bytes
}

// GC removes, for the keys in [start, end) (empty end: no bound), the
// versions no read at or above safePoint can see: of each key it keeps
// every version above safePoint and the newest one at or below it, unless
// that one is a tombstone or a value expired by safePoint's wall time
// (a read at or above safePoint judges expiry no earlier), and removes
// everything older. Reads below
// safePoint may then see wrong data; the caller refuses them, and refuses
// writes at or below safePoint, which could slip under a removed
// tombstone.
//
// Deletions go to w; r must not see them (a batch and the engine it
// commits to, or a snapshot). Work is bounded: a call stops once it has
// visited budget versions, though never before it has examined one key or
// removed one version, so calls always progress, and returns the user key
// to resume from (nil when the span is done). The caller commits w before
// the next call and reads with a reader that sees the commit. A key's
// versions above safePoint are passed by one seek, not visited.
//
// A key whose newest version at or below safePoint is an intent keeps
// every version (intent.go).
//
// A tombstone (or expired value) is removed in the same call as the last
// older version it hides, so a reader at or above safePoint never sees an
// older version come back between calls.
func GC(r storage.Reader, w storage.Writer, start, end []byte, safePoint hlc.Timestamp, budget int) (resume []byte, st GCStats, err error) {
	if budget <= 0 {
		return nil, st, fmt.Errorf("%w: a GC budget must be positive, got %d", ErrInvalidArgument, budget)
	}
	lo, hi := EngineSpan(start, end)
	it, err := r.NewIter(lo, hi)
	if err != nil {
		return nil, st, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	c := cursor{it: it}
	visited := 0
	var gone []byte // the engine key of a tombstone or expired value, removed last
	for ok := it.First(); ok; ok = it.Valid() {
		if ok, err := c.enterKey(); err != nil || !ok {
			return nil, st, err
		}
		if st.Keys > 0 && visited >= budget {
			return appendUnescaped(nil, c.esc()), st, nil
		}
		st.Keys++
		visited++
		if !c.seekVisible(safePoint) {
			continue
		}
		_, tomb, err := decodeValue(it.Value())
		if err != nil {
			return nil, st, fmt.Errorf("%w (key %q)", err, it.Key())
		}
		if intentTxn(it.Value()) != nil {
			c.nextKey() // resolving the intent may uncover what is below it
			continue
		}
		invisible := tomb || expired(expiresAt(it.Value()), safePoint.WallTime)
		goneLen := len(it.Value())
		gone = gone[:0]
		if invisible {
			gone = append(gone, it.Key()...)
		}
		for it.Next() && c.inKey() {
			visited++
			if visited > budget && st.Versions > 0 {
				return appendUnescaped(nil, c.esc()), st, nil
			}
			if err := remove(w, it.Key(), len(it.Value()), &st); err != nil {
				return nil, st, err
			}
		}
		if invisible {
			if err := remove(w, gone, goneLen, &st); err != nil {
				return nil, st, err
			}
		}
	}
	return nil, st, nil
}

func remove(w storage.Writer, ek []byte, valueLen int, st *GCStats) error {
	st.Versions++
	st.Bytes += int64(len(ek) + valueLen)
	return w.Delete(ek)
}
