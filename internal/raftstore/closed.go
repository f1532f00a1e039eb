package raftstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Reads below linearizable. A leaseholder periodically publishes, for each
// range it leads, a closed timestamp (index C, time T, HLC timestamp H): it
// held a valid lease at T and had committed through C. No other leader can
// commit while the lease holds, and every write acknowledged before T is at
// or below C, so a replica that has applied C holds every write committed
// before T. A BOUNDED(θ) read of the newest data is served by a replica
// whose latest closed timestamp is applied and at most θ old by the
// replica's clock. Clocks of the nodes are assumed synchronised well within
// θ (true on one machine; across machines θ must exceed the clock offset).
//
// H is closed before C is read (readOrder.close): below every write in
// flight, and no write is stamped at or below it after, so every write at
// or below H is at or below C. A replica that has applied C serves reads
// at any timestamp at or below H (readorder.go, checkFollowerReadAt).

// ReadOptions say how fresh a read must be. The zero value is linearizable.
type ReadOptions struct {
	Mode tidekvpb.ReadMode
	// MaxStaleness bounds a BOUNDED read's staleness (> 0).
	MaxStaleness time.Duration
	// Timestamp is the time a read on the versioned layout reads at
	// (zero: the newest data); below the range's GC threshold it is
	// refused. With a timestamp MaxStaleness is not used: a LINEARIZABLE
	// read is served by the leaseholder, others by any replica whose
	// closed timestamp covers it (readorder.go).
	Timestamp hlc.Timestamp
	// Txn is the ID of the transaction reading, whose own intents it
	// sees; another transaction's intent fails the read (*IntentError).
	Txn []byte
	// UncertaintyLimit, above Timestamp on a leaseholder read, makes a
	// committed version above Timestamp and at or below it fail the read
	// (*UncertainReadError), and another transaction's intent there fail
	// it as one at or below Timestamp does (*IntentError): the reader's
	// clock may lag the writer's, so the write may have been acknowledged
	// before the read began (docs/transactions.md, "Uncertainty").
	UncertaintyLimit hlc.Timestamp
}

// StaleReplicaError says a BOUNDED read reached a replica that cannot prove
// its state is fresh enough.
type StaleReplicaError struct {
	RangeID      uint64
	LeaderNodeID uint64
	// Staleness is how old the replica's applied closed timestamp is (0
	// when it has none applied).
	Staleness time.Duration
	Bound     time.Duration
	// At is the timestamp of a read at a timestamp, Closed the replica's
	// applied closed timestamp (zero: none).
	At, Closed hlc.Timestamp
}

func (e *StaleReplicaError) Error() string {
	if !e.At.IsZero() {
		return fmt.Sprintf("range %d: replica's closed timestamp %s is below the read timestamp %s", e.RangeID, e.Closed, e.At)
	}
	if e.Staleness == 0 {
		return fmt.Sprintf("range %d: replica has no applied closed timestamp within %v", e.RangeID, e.Bound)
	}
	return fmt.Sprintf("range %d: replica is %v behind, more than the bound %v", e.RangeID, e.Staleness.Round(time.Millisecond), e.Bound)
}

// closedTS is a closed timestamp as received (or, on the leader, published).
type closedTS struct {
	index uint64
	at    int64 // unix nanoseconds
	// ts is the HLC timestamp closed with index (zero from older nodes).
	ts hlc.Timestamp
}

// checkRead waits for or checks what the read mode needs before local state
// may be read at the spans it reads.
func (r *Replica) checkRead(ctx context.Context, ro ReadOptions, spans ...keySpan) error {
	if r.lost.Load() {
		return &DataLostError{RangeID: r.rangeID}
	}
	// A range frozen for a merge serves no read but ANY's (which promise
	// nothing): on other nodes the left range may have taken its span and
	// written there already, and the merge stamps the left range's writes
	// above only the reads served before it (applyMergeLocked).
	if into := r.desc.Load().GetMergingInto(); into != 0 && ro.Mode != tidekvpb.ReadMode_ANY {
		return &RangeFrozenError{RangeID: r.rangeID, Into: into}
	}
	if !ro.Timestamp.IsZero() {
		return r.checkReadAt(ctx, ro, spans)
	}
	switch ro.Mode {
	case tidekvpb.ReadMode_LINEARIZABLE:
		return r.waitLeaseRead(ctx)
	case tidekvpb.ReadMode_ANY:
		if r.desc.Load() == nil {
			return &RangeNotFoundError{RangeID: r.rangeID}
		}
		return nil
	case tidekvpb.ReadMode_BOUNDED:
		if ro.MaxStaleness <= 0 {
			return fmt.Errorf("%w: a bounded read needs a positive staleness bound", ErrInvalidRequest)
		}
		if r.desc.Load() == nil {
			return &RangeNotFoundError{RangeID: r.rangeID}
		}
		if r.leaseCovers() {
			return nil
		}
		err := &StaleReplicaError{RangeID: r.rangeID, LeaderNodeID: r.leaderNode.Load(), Bound: ro.MaxStaleness}
		ts := r.closed.Load()
		// An untrusted clock cannot say how old a closed timestamp is.
		if ts == nil || r.applied.Load() < ts.index || r.store.clockUntrusted.Load() != nil {
			return err
		}
		if age := time.Duration(r.store.Now().UnixNano() - ts.at); age > ro.MaxStaleness {
			err.Staleness = age
			return err
		}
		return nil
	}
	return fmt.Errorf("%w: unknown read mode %v", ErrInvalidRequest, ro.Mode)
}

// ClosedTimestamps returns, for each peer node, the closed timestamps of the
// ranges this node leads that have a replica on that peer, stamped with now
// (wall clock, read before the call). A range is included only if its lease
// is still valid after its commit index was read, which is later than now.
// The caller sends each list in one message.
func (s *Store) ClosedTimestamps(now time.Time) map[uint64][]*tidekvpb.ClosedTimestamp {
	return s.closedTimestamps(now, 0)
}

// ClosedTimestampsTo is ClosedTimestamps for one peer: a node answering
// the peer's exchange closes only the ranges that peer holds a replica of.
func (s *Store) ClosedTimestampsTo(now time.Time, peer uint64) []*tidekvpb.ClosedTimestamp {
	return s.closedTimestamps(now, peer)[peer]
}

// closedTimestamps closes the ranges this node leads, those with a replica
// on only if only is not 0.
func (s *Store) closedTimestamps(now time.Time, only uint64) map[uint64][]*tidekvpb.ClosedTimestamp {
	out := map[uint64][]*tidekvpb.ClosedTimestamp{}
	at := now.UnixNano()
	for _, r := range s.Replicas() {
		if !r.IsLeader() || !r.leaseValid() {
			continue
		}
		if only != 0 && !slices.ContainsFunc(r.Desc().GetReplicas(), func(rd *tidekvpb.ReplicaDescriptor) bool { return rd.GetNodeId() == only }) {
			continue
		}
		// Closed before the commit index is read: every write at or below
		// it has applied by then.
		ts := r.order.close(s.hlc.Now())
		r.mu.Lock()
		if r.mu.destroyed || r.mu.raw == nil {
			r.mu.Unlock()
			continue
		}
		commit := r.mu.raw.BasicStatus().GetCommit()
		desc := r.mu.state.GetDesc()
		r.mu.Unlock()
		// The lease may have lapsed while we took the lock; then the
		// commit index read may miss another leader's writes.
		if !r.leaseValid() {
			continue
		}
		r.noteClosed(closedTS{index: commit, at: at, ts: ts})
		ct := &tidekvpb.ClosedTimestamp{RangeId: r.rangeID, Index: commit, UnixNanos: at, Hlc: tidekvpb.FromHLC(ts)}
		for _, rd := range desc.GetReplicas() {
			if n := rd.GetNodeId(); n != s.nodeID {
				out[n] = append(out[n], ct)
			}
		}
	}
	return out
}

// ApplyClosedTimestamps records closed timestamps received from a
// leaseholder; unknown ranges are ignored.
func (s *Store) ApplyClosedTimestamps(cts []*tidekvpb.ClosedTimestamp) {
	for _, ct := range cts {
		if r := s.GetReplica(ct.GetRangeId()); r != nil {
			r.noteClosed(closedTS{index: ct.GetIndex(), at: ct.GetUnixNanos(), ts: ct.GetHlc().HLC()})
		}
	}
}

// noteClosed keeps the newest closed timestamp. A newer one from a new
// leaseholder may carry a lower index than an older one never did: indexes
// only grow with time under valid leases, so newest-by-time is enough.
func (r *Replica) noteClosed(ts closedTS) {
	for {
		cur := r.closed.Load()
		if cur != nil && cur.at >= ts.at {
			return
		}
		if r.closed.CompareAndSwap(cur, &ts) {
			return
		}
	}
}
