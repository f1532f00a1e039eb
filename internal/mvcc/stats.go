package mvcc

import (
	"context"
	"fmt"

	"github.com/tidekv/tidekv/internal/storage"
)

// Stats sizes the versioned data of a span.
type Stats struct {
	// LiveKeys and LiveBytes count the keys a read at the newest timestamp
	// finds and their user key and value bytes: what today's unversioned
	// range sizes measure.
	LiveKeys, LiveBytes int64
	// Versions and TotalBytes count every version stored, tombstones
	// included, and their engine key and value bytes: what the range holds
	// on disk and ships in a snapshot.
	Versions, TotalBytes int64
	// RecordBytes are the engine key and value bytes of the transaction
	// records stored in the span: they too ship in a snapshot.
	RecordBytes int64
}

// ComputeStats sizes the keys in [start, end) (empty end: no bound) by
// reading every version. Values count as live whatever their expiry: range
// sizes must not read low while expired values are still stored.
func ComputeStats(r storage.Reader, start, end []byte) (st Stats, err error) {
	return ComputeStatsAt(r, start, end, 0)
}

// ComputeStatsAt is ComputeStats with values expired at now (wall
// nanoseconds; 0: none) counted as garbage rather than live, as GC sees
// them once its safe point passes their expiry.
func ComputeStatsAt(r storage.Reader, start, end []byte, now int64) (st Stats, err error) {
	records := func(k, v []byte) { st.RecordBytes += int64(len(k) + len(v)) }
	err = eachVersion(context.Background(), r, start, end, records, func(c *cursor, first bool) error {
		raw := c.it.Value()
		st.Versions++
		st.TotalBytes += int64(len(c.it.Key()) + len(raw))
		if !first {
			return nil
		}
		val, tomb, err := decodeValue(raw)
		if err != nil {
			return fmt.Errorf("%w (key %q)", err, c.it.Key())
		}
		if !tomb && !expired(expiresAt(raw), now) {
			st.LiveKeys++
			st.LiveBytes += int64(unescapedLen(c.esc()) + len(val))
		}
		return nil
	})
	return st, err
}

// SplitKey returns the user key that divides the stored bytes of the keys
// in [start, end) about in half, counting every version (they all move with
// the range). It is a user-key boundary: every version of the returned key
// and of the keys after it lies at or above it, so a split there never
// separates two versions of one key. It is never the span's first key, so
// both halves hold data. A span with fewer than two keys cannot be split
// (ErrInvalidArgument).
func SplitKey(ctx context.Context, r storage.Reader, start, end []byte) ([]byte, error) {
	p, err := SplitPointsOf(ctx, r, start, end)
	if err != nil {
		return nil, err
	}
	if p.Keys() < 2 {
		return nil, fmt.Errorf("%w: [%q, %q) holds %d keys; a split needs at least two", ErrInvalidArgument, start, end, p.Keys())
	}
	return p.Cut(2)[0], nil
}

// SplitPointsOf reads every version in [start, end) into SplitPoints, each
// user key a candidate (never between two versions of one key).
func SplitPointsOf(ctx context.Context, r storage.Reader, start, end []byte) (*SplitPoints, error) {
	var p SplitPoints
	err := eachVersion(ctx, r, start, end, nil, func(c *cursor, first bool) error {
		p.Add(first, func() []byte { return appendUnescaped(nil, c.esc()) }, uint64(len(c.it.Key())+len(c.it.Value())))
		return nil
	})
	return &p, err
}

// eachVersion calls fn on every version in the span, in order, with first
// set on each key's newest version, and onRecord (if set) on every
// transaction record, checking ctx first and every 4096 versions.
func eachVersion(ctx context.Context, r storage.Reader, start, end []byte, onRecord func(key, value []byte), fn func(c *cursor, first bool) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	lo, hi := EngineSpan(start, end)
	it, err := r.NewIter(lo, hi)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	c := cursor{it: it, onRecord: onRecord}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		first := n == 0 || !c.inKey()
		if first {
			if ok, err := c.enterKey(); err != nil || !ok {
				return err
			}
		}
		if err := fn(&c, first); err != nil {
			return err
		}
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}
