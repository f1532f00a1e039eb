package raftstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// readOrder orders a range's reads at timestamps and its writes on the
// leaseholder: the timestamp cache (tscache.go) and the latches (latch.go)
// under one lock, so that a write's timestamp and its latch are fixed
// together with respect to a read's record and its look at the latches:
// either the read sees the write's latch and waits for it, or the write
// sees the read's record and is stamped above it.
type readOrder struct {
	mu      sync.Mutex
	cache   *tsCache
	latches latchSet
	// closed is the newest timestamp closed (closed.go).
	closed hlc.Timestamp
	// high is the highest timestamp a read was recorded at or closed.
	high hlc.Timestamp
	// handedOff: a lease transfer took high (handoff) and no lease has
	// held here since. A read recorded now would not reach the
	// transferee, which may win and stamp writes below it; set under mu,
	// cleared by the scheduler when a lease holds again (refreshLeaseLocked).
	handedOff atomic.Bool
	// skipCache: writes ignore the cache (Breaks.SkipTSCache).
	skipCache bool
}

func newReadOrder() *readOrder {
	return &readOrder{cache: newTSCache(tsCachePoints, tsCacheSpans), latches: latchSet{}}
}

// stamp returns the latch of a write of spans proposed at now by
// transaction txn ("": none): its timestamp is now, or above every read of
// its keys but txn's own and every closed timestamp when one is at or
// above now.
func (o *readOrder) stamp(spans []keySpan, now hlc.Timestamp, txn string) *latch {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.latchLocked(spans, o.aboveReadsLocked(spans, now, txn))
}

// stampReading is stamp for a write that also reads: a one-phase commit,
// which validates its reads of reads up to its own timestamp. The reads
// are recorded at that timestamp, so no later write of them lands below
// it, and it returns the writes in flight at or below it on them, which
// the commit waits for before it proposes.
func (o *readOrder) stampReading(writes, reads []keySpan, now hlc.Timestamp, txn string) (*latch, []*latch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ts := o.aboveReadsLocked(writes, now, txn)
	waits := o.latches.blocking(reads, ts) // before its own latch: it never waits for itself
	for _, sp := range reads {
		o.cache.add(sp, ts, txn)
	}
	o.high = maxTS(o.high, ts)
	return o.latchLocked(writes, ts), waits
}

// aboveReadsLocked is now, or just above the newest read (or closed
// timestamp) of spans by others than txn when that is at or above now.
func (o *readOrder) aboveReadsLocked(spans []keySpan, now hlc.Timestamp, txn string) hlc.Timestamp {
	ts := now
	if o.skipCache {
		return ts
	}
	for _, sp := range spans {
		if m := o.cache.max(sp, txn); !m.Less(ts) {
			ts = m.Next()
		}
	}
	return ts
}

func (o *readOrder) latchLocked(spans []keySpan, ts hlc.Timestamp) *latch {
	l := &latch{ts: ts, spans: spans}
	o.latches[l] = struct{}{}
	return l
}

// release ends l; unknown says its write's outcome is unknown (latch.go).
func (o *readOrder) release(l *latch, unknown bool) {
	o.mu.Lock()
	delete(o.latches, l)
	done := l.done
	l.unknown = unknown
	o.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// read records a read of spans at ts by transaction txn ("": none) and
// returns what it must wait for before it reads the engine (latch.go), or
// false when a lease transfer has taken the reads to hand on since the
// last lease here: the read must not be served here then.
func (o *readOrder) read(spans []keySpan, ts hlc.Timestamp, txn string) ([]*latch, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, sp := range spans {
		o.cache.add(sp, ts, txn)
	}
	o.high = maxTS(o.high, ts)
	if o.handedOff.Load() {
		return nil, false
	}
	return o.latches.blocking(spans, ts), true
}

// handoff is what a lease transfer hands the new leaseholder: the highest
// timestamp read at or closed here. A read is recorded before its lease is
// checked (checkReadAt), so one served under a lease voided before this
// call is in it.
func (o *readOrder) handoff() hlc.Timestamp {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.handedOff.Store(true)
	return o.high
}

func maxTS(a, b hlc.Timestamp) hlc.Timestamp {
	if a.Less(b) {
		return b
	}
	return a
}

// close closes a timestamp at most target: below every write in flight and
// never below one closed before. No write is stamped at or below it after.
func (o *readOrder) close(target hlc.Timestamp) hlc.Timestamp {
	o.mu.Lock()
	defer o.mu.Unlock()
	if low, ok := o.latches.lowest(); ok && !target.Less(low) {
		target = prev(low)
	}
	if target.Less(o.closed) {
		target = o.closed
	}
	o.closed = target
	o.high = maxTS(o.high, target)
	o.cache.raise(target)
	return target
}

// leaseStart starts a lease at now: every write is stamped above it, and
// a transfer onwards hands at least now on (now may stand for reads an
// earlier leaseholder served, which this one has not seen itself).
func (o *readOrder) leaseStart(now hlc.Timestamp) {
	o.mu.Lock()
	o.cache.raise(now)
	o.high = maxTS(o.high, now)
	o.mu.Unlock()
}

// leaseLowWater is what a new leaseholder stamps writes above: past every
// read at a timestamp an earlier leaseholder served. A read at T moved
// that node's clock to T, and no node's clock runs more than the maximum
// offset ahead of its physical clock (hlc.Clock.Update), which is at most
// the maximum offset ahead of ours: T ≤ ours + 2 × max offset then. A
// lease taken by election starts at least half an election timeout after
// the old lease ended, so only the part of 2 × max offset beyond that is
// left to add (none with the defaults: 250 ms and 1 s). A lease taken by
// transfer starts at once, but the MsgTimeoutNow that started it carried
// the old leaseholder's highest read (readOrder.handoff), and the
// transferee stamps above that too (Store.HandleRaftMessage).
func (r *Replica) leaseLowWater() hlc.Timestamp {
	now := r.store.hlc.Now()
	cfg := &r.store.cfg
	if margin := 2*cfg.MaxClockOffset - cfg.electionTimeout()/2; margin > 0 {
		now.WallTime += int64(margin)
	}
	return now
}

// prev is the timestamp just below t (t not zero).
func prev(t hlc.Timestamp) hlc.Timestamp {
	if t.Logical > 0 {
		return hlc.Timestamp{WallTime: t.WallTime, Logical: t.Logical - 1}
	}
	return hlc.Timestamp{WallTime: t.WallTime - 1, Logical: math.MaxUint32}
}

// stampWrite is the timestamp and latch of a write of spans proposed now:
// none until every replica's binary applies log version 4 (an older one
// would apply the write unversioned), which a range already on the
// versioned layout proves, since only then is a migration proposed.
func (r *Replica) stampWrite(spans []keySpan) (*tidekvpb.LogTimestamp, *latch) {
	if r.store.logVersion.Load() < LogVersionMVCC && !r.VersionedLayout() {
		return nil, nil
	}
	l := r.order.stamp(spans, r.store.hlc.Now(), "")
	return logTimestamp(l.ts), l
}

// commitWait holds an acknowledged write back until the node's clock has
// passed its timestamp. A write is stamped ahead of the clock only when a
// read at a future timestamp (at most the maximum clock offset ahead) was
// served on its keys, or early in a lease whose low-water mark has a
// margin (leaseLowWater); without the wait a client could see it
// acknowledged, pick a timestamp from its own clock and read a snapshot
// without it. The wait is at most the maximum offset, also on a clock
// that tests hold still.
func (r *Replica) commitWait(ctx context.Context, ts *tidekvpb.LogTimestamp) {
	r.store.CommitWait(ctx, commandTimestamp(ts))
}

// CommitWait waits until the store's clock has passed ts, at most the
// maximum offset: what Replica.commitWait does for a write, for an answer
// that carries a timestamp from elsewhere (a transaction's commit
// timestamp, the highest of its reads' and its writes').
func (s *Store) CommitWait(ctx context.Context, ts hlc.Timestamp) {
	d := time.Duration(ts.WallTime - s.Now().UnixNano())
	if d <= 0 {
		return
	}
	t := time.NewTimer(min(d, s.hlc.MaxOffset()))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// checkReadAt waits for or checks what a read of spans at ro.Timestamp (T)
// needs. A LINEARIZABLE one, or one that reaches the leaseholder, is
// served under the lease: the clock moves to T, the read is recorded in
// the timestamp cache, and it waits for the writes in flight at or below
// T on its spans. Any other is a follower read: served when the replica's
// applied closed timestamp is at or above T, else refused with
// StaleReplicaError (the client goes on to the leaseholder).
func (r *Replica) checkReadAt(ctx context.Context, ro ReadOptions, spans []keySpan) error {
	ts := ro.Timestamp
	if !r.VersionedLayout() {
		return fmt.Errorf("%w: range %d keeps no history (unversioned layout): it cannot be read at a timestamp", ErrInvalidRequest, r.rangeID)
	}
	if err := r.checkGCThreshold(ts); err != nil {
		return err
	}
	if _, err := r.store.hlc.Update(ts); err != nil {
		return fmt.Errorf("%w: read timestamp %s is in the future, more than the maximum clock offset %v ahead of node %d's clock",
			ErrInvalidRequest, ts, r.store.hlc.MaxOffset(), r.store.nodeID)
	}
	if ro.Mode != tidekvpb.ReadMode_LINEARIZABLE && !r.leaseCovers() {
		return r.checkFollowerReadAt(ts)
	}
	// Recorded before the lease is checked, for a lease transfer
	// (readOrder.handoff); a record on a replica that turns out not to
	// hold the lease only pushes its writes, if it ever leads, higher.
	waits, ok := r.order.read(spans, ts, string(ro.Txn))
	if !ok {
		// Served through ReadIndex before the transferee wins, it
		// could be written under.
		return r.notLeader()
	}
	if err := r.waitLeaseRead(ctx); err != nil {
		return err
	}
	return r.waitLatches(ctx, waits)
}

// checkFollowerReadAt allows a read at ts on a replica that has applied a
// closed timestamp at or above it.
func (r *Replica) checkFollowerReadAt(ts hlc.Timestamp) error {
	if r.desc.Load() == nil {
		return &RangeNotFoundError{RangeID: r.rangeID}
	}
	c := r.closed.Load()
	if c != nil && !c.ts.Less(ts) && r.applied.Load() >= c.index {
		return nil
	}
	err := &StaleReplicaError{RangeID: r.rangeID, LeaderNodeID: r.leaderNode.Load(), At: ts}
	if c != nil {
		err.Closed = c.ts
	}
	return err
}
