package raftstore

import (
	"github.com/tidekv/tidekv/internal/hlc"
)

// Latches: per range, in the leaseholder's memory, the writes it proposed
// that have not applied (or been dropped) yet, each on its keys at its
// timestamp. A read at T waits for the latches at or below T on its keys
// (readorder.go): without them it could miss a write stamped below T that
// was proposed before the read and applies after it. A latch is released
// when its proposal is answered (proposal.finish), never when its proposer
// gives up: the command may still apply.

type latch struct {
	ts    hlc.Timestamp
	spans []keySpan
	// done is closed on release; made only once a read waits for the
	// latch (under readOrder.mu), so that a write allocates no channel.
	done chan struct{}
}

type latchSet map[*latch]struct{}

// blocking returns what a read of spans at ts waits on: a channel for each
// latch at or below ts on any of spans, closed on its release.
func (ls latchSet) blocking(spans []keySpan, ts hlc.Timestamp) []chan struct{} {
	var out []chan struct{}
	for l := range ls {
		if ts.Less(l.ts) || !l.overlaps(spans) {
			continue
		}
		if l.done == nil {
			l.done = make(chan struct{})
		}
		out = append(out, l.done)
	}
	return out
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
