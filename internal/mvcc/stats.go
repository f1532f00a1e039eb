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
}

// ComputeStats sizes the keys in [start, end) (empty end: no bound) by
// reading every version.
func ComputeStats(r storage.Reader, start, end []byte) (st Stats, err error) {
	err = eachVersion(context.Background(), r, start, end, func(c *cursor, first bool) error {
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
		if !tomb {
			st.LiveKeys++
			st.LiveBytes += int64(unescapedLen(c.esc()) + len(val))
		}
		return nil
	})
	return st, err
}

// splitCheckpoints bounds the candidate keys SplitKey keeps: with this many
// it drops every other one and samples keys half as often, so memory stays
// bounded and the key chosen is within one sampling stride of the middle.
const splitCheckpoints = 1024

// SplitKey returns the user key that divides the stored bytes of the keys
// in [start, end) about in half, counting every version (they all move with
// the range). It is a user-key boundary: every version of the returned key
// and of the keys after it lies at or above it, so a split there never
// separates two versions of one key. It is never the span's first key, so
// both halves hold data. A span with fewer than two keys cannot be split
// (ErrInvalidArgument).
func SplitKey(ctx context.Context, r storage.Reader, start, end []byte) ([]byte, error) {
	type checkpoint struct {
		esc    []byte // escaped user key
		before int64  // bytes of the versions before it
	}
	var cps []checkpoint
	var total int64
	keys, stride := 0, 1
	err := eachVersion(ctx, r, start, end, func(c *cursor, first bool) error {
		if first {
			if keys > 0 && keys%stride == 0 {
				cps = append(cps, checkpoint{esc: append([]byte(nil), c.esc()...), before: total})
				if len(cps) == splitCheckpoints {
					kept := cps[:0]
					for i := 1; i < len(cps); i += 2 {
						kept = append(kept, cps[i])
					}
					clear(cps[len(kept):])
					cps, stride = kept, 2*stride
				}
			}
			keys++
		}
		total += int64(len(c.it.Key()) + len(c.it.Value()))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if keys < 2 {
		return nil, fmt.Errorf("%w: [%q, %q) holds %d keys; a split needs at least two", ErrInvalidArgument, start, end, keys)
	}
	half := total / 2
	dist := func(c checkpoint) int64 { return max(c.before-half, half-c.before) }
	best := cps[0]
	for _, c := range cps[1:] {
		if dist(c) < dist(best) {
			best = c
		}
	}
	return appendUnescaped(nil, best.esc), nil
}

// eachVersion calls fn on every version in the span, in order, with first
// set on each key's newest version, checking ctx first and every 4096
// versions.
func eachVersion(ctx context.Context, r storage.Reader, start, end []byte, fn func(c *cursor, first bool) error) (err error) {
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
	c := cursor{it: it}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		first := n == 0 || !c.inKey()
		if first {
			if err := c.enterKey(); err != nil {
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
