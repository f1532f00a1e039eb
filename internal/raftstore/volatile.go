package raftstore

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/retry"
	"github.com/tidekv/tidekv/internal/storage"
)

// A range whose data a node keeps in memory (a memory key space's,
// storage.Volatile) has lost it when the node restarts, while its Raft
// state and log, in Pebble, survive. Such a replica starts lost: it takes
// part in Raft as before (its log is intact, so its votes and
// acknowledgements stay sound) and applies entries on what is left, but
// serves no read, takes no lease and proposes nothing, and every message
// it sends says so (RaftMessage.data_lost). Its range's leader repairs it,
// one step at a time (decideLost):
//
//   - A leader that has its data replaces each lost replica with a fresh
//     one on the same node (removal, then an addition whose snapshot
//     carries the data), through the same steps as a move.
//   - A lost leader hands leadership to a voter that says it has the data;
//     that leader then replaces the lost ones, this one included.
//   - When every voter has said it lost its data, none is left to copy
//     from: the lost leader proposes ResetLostCommand, and every replica
//     empties the range's data at that entry and serves again, a cache
//     that starts cold. A range with one voter does so at once. (Log
//     version 9: until every node's binary applies the command, such a
//     range waits.)
//
// So a restart of fewer than all voters loses no acknowledged write, and a
// restart of all of them (a whole cluster) costs the data a cache may
// lose and nothing else: the range serves again after an election.

// UserDataSpans are the engine spans that hold user data of keys in
// [start, end) of ranges other than the meta range, in each layout: what
// a memory key space's engine must own.
func UserDataSpans(start, end []byte) [2][2][]byte {
	d := &tidekvpb.RangeDescriptor{RangeId: keys.FirstUserRangeID, StartKey: start, EndKey: end}
	ulo, uhi := dataSpan(d, false)
	vlo, vhi := dataSpan(d, true)
	return [2][2][]byte{{ulo, uhi}, {vlo, vhi}}
}

// DataLostError says the replica asked lost its data with a restart and
// serves nothing until its range repairs it (volatile.go).
type DataLostError struct {
	RangeID uint64
}

func (e *DataLostError) Error() string {
	return fmt.Sprintf("range %d: this replica's data was in memory and went with its node's restart; it serves again once its range has repaired it, retry", e.RangeID)
}

// markLostAtStart marks a replica loaded at start lost if its data was in
// volatile spans, or if a snapshot was replacing its data when the node
// stopped (snapshot.go): either way what it applied is not all there.
func (s *Store) markLostAtStart(r *Replica, st *tidekvpb.ReplicaState) error {
	why := "its data was in memory and went with the restart"
	v, ok := s.eng.(storage.Volatile)
	if !ok || !v.Volatile(dataSpan(st.GetDesc(), isMVCC(st))) {
		_, incomplete, err := s.eng.Get(keys.DataIncompleteKey(r.rangeID))
		if err != nil || !incomplete {
			return err
		}
		why = "the node stopped while a snapshot was replacing its data"
	}
	r.lost.Store(true)
	s.stats.ReplicasLost.Add(1)
	log.Printf("range %d: %s: the replica serves nothing until its range repairs it (Raft state and log intact, applied index %d)",
		r.rangeID, why, st.GetAppliedIndex())
	return nil
}

// DataLost reports whether the replica lost its data with a restart and
// has not been repaired yet.
func (r *Replica) DataLost() bool { return r.lost.Load() }

type lostStepKind int

const (
	lostWait     lostStepKind = iota
	lostReplace               // replace a lost replica with a fresh one
	lostTransfer              // hand leadership to a voter with the data
	lostReset                 // every voter lost it: empty the range
)

// lostStep is what a leader does next about lost data, and why.
type lostStep struct {
	kind    lostStepKind
	replica *tidekvpb.ReplicaDescriptor // lostReplace's and lostTransfer's
	reason  string
}

// decideLost decides for the leader (replica self) of a range described by
// d, whose own data is lost or not, given what the other replicas said of
// theirs since it took over (heard: lost or not; absent: not heard yet).
func decideLost(d *tidekvpb.RangeDescriptor, self uint64, selfLost bool, heard map[uint64]bool) lostStep {
	if isJoint(d) || d.GetMergingInto() != 0 {
		return lostStep{} // a change or a merge first finishes or rolls back
	}
	if !selfLost {
		for _, rd := range d.GetReplicas() {
			if rd.GetReplicaId() != self && heard[rd.GetReplicaId()] {
				return lostStep{kind: lostReplace, replica: rd, reason: fmt.Sprintf("replica %d on node %d lost its data with a restart; a fresh one takes its place", rd.GetReplicaId(), rd.GetNodeId())}
			}
		}
		return lostStep{}
	}
	unheard := 0
	for _, rd := range d.GetReplicas() {
		if rd.GetType() != tidekvpb.ReplicaType_VOTER || rd.GetReplicaId() == self {
			continue
		}
		lost, ok := heard[rd.GetReplicaId()]
		switch {
		case ok && !lost:
			return lostStep{kind: lostTransfer, replica: rd, reason: fmt.Sprintf("this leader lost its data with a restart; the voter on node %d has it", rd.GetNodeId())}
		case !ok:
			unheard++
		}
	}
	if unheard > 0 {
		return lostStep{} // one of them may still hold the data
	}
	return lostStep{kind: lostReset, reason: "every voter lost the range's data with a restart: it starts again empty"}
}

// lostRepairTimeout bounds one repair step run in the background.
const lostRepairTimeout = time.Minute

// tendLostLocked takes the leader's next step about lost data, if any.
// Called on ticks by the scheduler with r.mu held.
func (r *Replica) tendLostLocked() {
	if !r.isLeader.Load() || r.repairing.Load() || (!r.lost.Load() && !r.anyPeerLostLocked()) {
		return
	}
	step := decideLost(r.mu.state.GetDesc(), r.mu.replicaID, r.lost.Load(), r.mu.peerLost)
	switch step.kind {
	case lostTransfer:
		if r.mu.raw.BasicStatus().LeadTransferee != step.replica.GetReplicaId() {
			log.Printf("range %d: leadership to node %d: %s", r.rangeID, step.replica.GetNodeId(), step.reason)
		}
		r.leaseExpiry.Store(0)
		r.mu.raw.TransferLeader(step.replica.GetReplicaId())
	case lostReset, lostReplace:
		if step.kind == lostReset && r.store.logVersion.Load() < LogVersionResetLost {
			return // until every node's binary applies the reset
		}
		r.repairing.Store(true)
		go func() {
			defer r.repairing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), lostRepairTimeout)
			defer cancel()
			log.Printf("range %d: %s", r.rangeID, step.reason)
			var err error
			if step.kind == lostReset {
				_, err = r.propose(ctx, &tidekvpb.RaftCommand{ResetLost: &tidekvpb.ResetLostCommand{}}, nil)
			} else {
				err = r.replaceLost(ctx, step.replica)
			}
			if err != nil {
				log.Printf("range %d: repairing lost data: %v (tried again on a later tick)", r.rangeID, err)
			}
		}()
	}
}

func (r *Replica) anyPeerLostLocked() bool {
	for _, lost := range r.mu.peerLost {
		if lost {
			return true
		}
	}
	return false
}

// notePeerLostLocked records what a message from peer said of its data.
func (r *Replica) notePeerLostLocked(peer uint64, lost bool) {
	r.mu.peerLost[peer] = lost
}

// replaceLost removes the lost replica rd and, if it was a voter, adds a
// fresh one on the same node, which a snapshot fills. Learners are only
// removed: placement adds them where load asks for them. Once the lost
// voter is out, nothing in the range says a voter is owed there, so a
// failed addition (the new learner too slow to answer on a busy node) is
// tried again here, backing off, until it succeeds, the range has its
// voters again some other way, this replica stops leading, or ctx ends.
func (r *Replica) replaceLost(ctx context.Context, rd *tidekvpb.ReplicaDescriptor) error {
	voters, removed, err := r.removeLost(ctx, rd)
	if err != nil || !removed || rd.GetType() != tidekvpb.ReplicaType_VOTER {
		return err
	}
	node := rd.GetNodeId()
	for attempt := 1; ; attempt++ {
		done, err := r.readdVoter(ctx, node, voters)
		if done || err == nil {
			return err
		}
		log.Printf("range %d: repairing lost data: adding a voter on node %d again: %v", r.rangeID, node, err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(retry.Backoff(attempt, 100*time.Millisecond, 5*time.Second)):
		}
	}
}

// removeLost removes the lost replica rd unless it is gone already or a
// change is under way; voters is how many the range had before.
func (r *Replica) removeLost(ctx context.Context, rd *tidekvpb.ReplicaDescriptor) (voters int, removed bool, err error) {
	r.store.adminMu(r.rangeID).Lock()
	defer r.store.adminMu(r.rangeID).Unlock()
	r.changing.Add(1)
	defer r.changing.Add(-1)
	d := r.desc.Load()
	cur := replicaOnNode(d, rd.GetNodeId())
	if cur == nil || cur.GetReplicaId() != rd.GetReplicaId() || isJoint(d) {
		return 0, false, nil // replaced already, or a change is under way
	}
	node := rd.GetNodeId()
	_, err = r.proposeChange(ctx, removeChange(rd.GetReplicaId()), d, func(nd *tidekvpb.RangeDescriptor) bool { return replicaOnNode(nd, node) == nil })
	return countVoters(d), err == nil, err
}

// readdVoter adds a voter on node, the second half of a replacement (a
// learner left there by a failed attempt is promoted); done says there is
// nothing more to do: it succeeded, node holds a voter again, the range
// has its voters again, or this replica no longer leads.
func (r *Replica) readdVoter(ctx context.Context, node uint64, voters int) (done bool, err error) {
	r.store.adminMu(r.rangeID).Lock()
	defer r.store.adminMu(r.rangeID).Unlock()
	r.changing.Add(1)
	defer r.changing.Add(-1)
	d := r.desc.Load()
	switch there := replicaOnNode(d, node); {
	case !r.isLeader.Load():
		return true, r.notLeader()
	case countVoters(d) >= voters, there != nil && there.GetType() != tidekvpb.ReplicaType_LEARNER:
		return true, nil
	}
	if _, err := r.addVoter(ctx, d, node, nil); err != nil {
		return false, err
	}
	r.store.stats.LostReplicasReplaced.Add(1)
	return true, nil
}

// applyResetLostLocked empties the range's data (both layouts); once the
// batch is written the replica is no longer lost.
func (r *Replica) applyResetLostLocked(ab *applyBatch) (applyResult, []func()) {
	d := r.mu.state.GetDesc()
	for _, versioned := range []bool{false, true} {
		lo, hi := dataSpan(d, versioned)
		ab.clearSpan(r, lo, hi)
		for k := range ab.versions {
			if k >= string(lo) && k < string(hi) {
				delete(ab.versions, k)
			}
		}
	}
	// Empty is complete: a snapshot the node stopped in no longer matters.
	_ = ab.del(keys.DataIncompleteKey(r.rangeID))
	s := r.store
	return applyResult{}, []func(){func() {
		r.lost.Store(false)
		s.stats.RangesReset.Add(1)
		log.Printf("range %d: data reset on node %d: the range starts again empty", r.rangeID, s.nodeID)
	}}
}
