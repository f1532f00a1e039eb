package raftstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/hlc"
)

// Reads below linearizable. A leaseholder periodically publishes, for each
// range it leads, a closed timestamp (index C, time T): it held a valid
// lease at T and had committed through C. No other leader can commit while
// the lease holds, and every write acknowledged before T is at or below C,
// so a replica that has applied C holds every write committed before T. A
// BOUNDED(θ) read is served by a replica whose latest closed timestamp is
// applied and at most θ old by the replica's clock. Clocks of the nodes are
// assumed synchronised well within θ (true on one machine; across machines
// θ must exceed the clock offset).

// ReadOptions say how fresh a read must be. The zero value is linearizable.
type ReadOptions struct {
	Mode tidekvpb.ReadMode
	// MaxStaleness bounds a BOUNDED read's staleness (> 0).
	MaxStaleness time.Duration
	// Timestamp is the time a read on the versioned layout reads at
	// (zero: the newest data); below the range's GC threshold it is
	// refused. Step 3 of docs/transactions.md sets it from requests,
	// together with the timestamp cache that keeps writes from landing
	// under it later; until then only tests do.
	Timestamp hlc.Timestamp
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
}

func (e *StaleReplicaError) Error() string {
	if e.Staleness == 0 {
		return fmt.Sprintf("range %d: replica has no applied closed timestamp within %v", e.RangeID, e.Bound)
	}
	return fmt.Sprintf("range %d: replica is %v behind, more than the bound %v", e.RangeID, e.Staleness.Round(time.Millisecond), e.Bound)
}

// closedTS is a closed timestamp as received (or, on the leader, published).
type closedTS struct {
	index uint64
	at    int64 // unix nanoseconds
}

// checkRead waits for or checks what the read mode needs before local state
// may be read.
func (r *Replica) checkRead(ctx context.Context, ro ReadOptions) error {
	if !ro.Timestamp.IsZero() && !r.VersionedLayout() {
		return fmt.Errorf("%w: range %d keeps no history (unversioned layout): it cannot be read at a timestamp", ErrInvalidRequest, r.rangeID)
	}
	if err := r.checkGCThreshold(ro.Timestamp); err != nil {
		return err
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
	out := map[uint64][]*tidekvpb.ClosedTimestamp{}
	at := now.UnixNano()
	for _, r := range s.Replicas() {
		if !r.IsLeader() || !r.leaseValid() {
			continue
		}
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
		r.noteClosed(closedTS{index: commit, at: at})
		ct := &tidekvpb.ClosedTimestamp{RangeId: r.rangeID, Index: commit, UnixNanos: at}
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
			r.noteClosed(closedTS{index: ct.GetIndex(), at: ct.GetUnixNanos()})
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
