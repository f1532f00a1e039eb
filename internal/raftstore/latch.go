package raftstore

import (
	"context"

	"github.com/tidekv/tidekv/api/hlc"
)

// Latches: per range, in the leaseholder's memory, the writes it proposed
// that have not applied (or been dropped) yet, each on its keys at its
// timestamp. A read at T waits for the latches at or below T on its keys
// (readorder.go): without them it could miss a write stamped below T that
// was proposed before the read and applies after it. A latch is released
// when its proposal is answered (proposal.finish), never when its proposer
// gives up: the command may still apply. One answered as ambiguous
// (leadership moved with it pending) may still apply elsewhere, below the
// timestamps of the reads that waited for it, so those reads must not go
// on here (unknown; waitLatches).

type latch struct {
	ts    hlc.Timestamp
	spans []keySpan
	// done is closed on release; made only once a read waits for the
	// latch (under readOrder.mu), so that a write allocates no channel.
	done chan struct{}
	// unknown: released with the write's outcome unknown; set before done
	// is closed.
	unknown bool
}

type latchSet map[*latch]struct{}

// blocking returns what a read of spans at ts waits on: each latch at or
// below ts on any of spans, whose done is closed on its release.
func (ls latchSet) blocking(spans []keySpan, ts hlc.Timestamp) []*latch {
	var out []*latch
	for l := range ls {
		if ts.Less(l.ts) || !l.overlaps(spans) {
			continue
		}
		if l.done == nil {
			l.done = make(chan struct{})
		}
		out = append(out, l)
	}
	return out
}

// waitLatches waits for ls's releases. A write released with its outcome
// unknown may yet commit below the waiting read's timestamp on another
// leader: the read is refused (NotLeaderError), and goes to the range's
// new leaseholder.
func (r *Replica) waitLatches(ctx context.Context, ls []*latch) error {
	for _, l := range ls {
		select {
		case <-l.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if l.unknown {
			return r.notLeader()
		}
	}
	return nil
}

func (l *latch) overlaps(spans []keySpan) bool {
	for _, a := range l.spans {
		for _, b := range spans {
			if a.overlaps(b) {
				return true
			}
		}
	}
	return false
}

// lowest is the lowest timestamp held, ok false when none is.
func (ls latchSet) lowest() (low hlc.Timestamp, ok bool) {
	for l := range ls {
		if !ok || l.ts.Less(low) {
			low, ok = l.ts, true
		}
	}
	return low, ok
}
