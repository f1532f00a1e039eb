package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
)

// Split cuts the range at key; newRangeID must come from the meta range's
// allocator. It waits for a replica change in progress to end first (up to
// splitWaitForChange): splitting in the middle of one would copy its
// learner into the new range, where nothing would promote it.
func (r *Replica) Split(ctx context.Context, key []byte, newRangeID uint64) (*tidekvpb.SplitResponse, error) {
	if newRangeID == 0 || r.store.GetReplica(newRangeID) != nil {
		return nil, fmt.Errorf("%w: range ID %d is not fresh", ErrInvalidRequest, newRangeID)
	}
	mu := r.store.adminMu(r.rangeID)
	if err := lockWithin(ctx, mu, splitWaitForChange); err != nil {
		return nil, &RangeBusyError{RangeID: r.rangeID, What: "a replica change", Waited: splitWaitForChange}
	}
	defer mu.Unlock()
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Split: &tidekvpb.SplitCommand{SplitKey: key, NewRangeId: newRangeID}}, nil)
	if err != nil {
		return nil, err
	}
	return res.split, nil
}

// TransferLease asks Raft to hand leadership to the replica on targetNode.
func (r *Replica) TransferLease(targetNode uint64) error {
	if !r.isLeader.Load() {
		return r.notLeader()
	}
	rd := replicaOnNode(r.desc.Load(), targetNode)
	if rd == nil || (rd.GetType() != tidekvpb.ReplicaType_VOTER && rd.GetType() != tidekvpb.ReplicaType_VOTER_INCOMING) {
		return fmt.Errorf("%w: node %d holds no voter of range %d", ErrInvalidRequest, targetNode, r.rangeID)
	}
	r.in.Lock()
	r.in.transfer = rd.GetReplicaId()
	r.in.Unlock()
	r.store.schedule(r.rangeID)
	return nil
}

func replicaOnNode(d *tidekvpb.RangeDescriptor, node uint64) *tidekvpb.ReplicaDescriptor {
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == node {
			return rd
		}
	}
	return nil
}

// removeChange is the conf change that removes one replica.
func removeChange(replicaID uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(replicaID)}}}
}

func countVoters(d *tidekvpb.RangeDescriptor) int {
	n := 0
	for _, rd := range d.GetReplicas() {
		if rd.GetType() == tidekvpb.ReplicaType_VOTER {
			n++
		}
	}
	return n
}

func isJoint(d *tidekvpb.RangeDescriptor) bool {
	for _, rd := range d.GetReplicas() {
		if t := rd.GetType(); t == tidekvpb.ReplicaType_VOTER_INCOMING || t == tidekvpb.ReplicaType_VOTER_OUTGOING {
			return true
		}
	}
	return false
}

// ChangeReplicas adds a voter on addNode and/or removes the replica on
// removeNode (0 for none), never leaving fewer voters than the replication
// factor. An addition goes learner → snapshot → catch-up → promotion; with
// a removal the promotion and the removal form one joint-consensus change.
// A plain learner already on addNode (an interrupted addition) is caught up
// and promoted; an adaptive learner (AddLearner) never is: remove it first.
// Removing a learner, adaptive or not, needs no replication factor check.
// Only the leaseholder runs it; one change per range at a time.
func (r *Replica) ChangeReplicas(ctx context.Context, addNode, removeNode uint64) (*tidekvpb.RangeDescriptor, error) {
	r.store.adminMu(r.rangeID).Lock()
	defer r.store.adminMu(r.rangeID).Unlock()
	r.changing.Add(1)
	defer r.changing.Add(-1)
	if !r.isLeader.Load() {
		return nil, r.notLeader()
	}
	if addNode != 0 && addNode == removeNode {
		return nil, fmt.Errorf("%w: cannot add and remove node %d at once", ErrInvalidRequest, addNode)
	}
	if into := r.desc.Load().GetMergingInto(); into != 0 {
		return nil, &RangeFrozenError{RangeID: r.rangeID, Into: into}
	}
	if err := r.waitDesc(ctx, func(d *tidekvpb.RangeDescriptor) bool { return !isJoint(d) }); err != nil {
		return nil, fmt.Errorf("waiting for a previous change to finish: %w", err)
	}
	d := r.desc.Load()
	if a := replicaOnNode(d, addNode); addNode != 0 && a != nil {
		if isAdaptiveLearner(a) {
			return nil, fmt.Errorf("%w: node %d holds an adaptive learner of range %d, which is never promoted; remove it first",
				ErrInvalidRequest, addNode, r.rangeID)
		}
		if a.GetType() == tidekvpb.ReplicaType_VOTER {
			addNode = 0 // already a voter: only the removal is left to do
		}
	}
	var removeRd *tidekvpb.ReplicaDescriptor
	if removeNode != 0 {
		if removeRd = replicaOnNode(d, removeNode); removeRd == nil {
			return nil, fmt.Errorf("%w: node %d holds no replica of range %d", ErrInvalidRequest, removeNode, r.rangeID)
		}
		// Refuse before moving the lease below: a refused change must
		// change nothing.
		if rf := r.store.replicationFactor(d.GetStartKey()); addNode == 0 && removeRd.GetType() == tidekvpb.ReplicaType_VOTER && countVoters(d)-1 < rf {
			return nil, fmt.Errorf("%w: removing node %d would leave range %d with %d voters, below the replication factor %d; add a replica first",
				ErrInvalidRequest, removeNode, r.rangeID, countVoters(d)-1, rf)
		}
		if removeNode == r.store.nodeID {
			if addNode != 0 && countVoters(d) == 1 {
				// The only voter moves: the new one joins first (two
				// voters for a moment), or no one could take the lease.
				if _, err := r.addVoter(ctx, d, addNode, nil); err != nil {
					return nil, err
				}
			}
			// Hand the lease away first; the caller retries at the new leaseholder.
			if err := r.transferAway(); err != nil {
				return nil, err
			}
			return nil, r.notLeader()
		}
	}
	if addNode == 0 {
		if removeRd == nil {
			return d, nil
		}
		return r.proposeChange(ctx, removeChange(removeRd.GetReplicaId()), d, func(nd *tidekvpb.RangeDescriptor) bool { return replicaOnNode(nd, removeNode) == nil })
	}
	return r.addVoter(ctx, d, addNode, removeRd)
}

// addVoter adds a voter on addNode to d, removing removeRd (nil: none) in
// the same joint change: learner, snapshot, catch-up, promotion. A learner
// already there is caught up and promoted. The caller holds adminMu.
func (r *Replica) addVoter(ctx context.Context, d *tidekvpb.RangeDescriptor, addNode uint64, removeRd *tidekvpb.ReplicaDescriptor) (*tidekvpb.RangeDescriptor, error) {
	add := replicaOnNode(d, addNode)
	if add == nil {
		// Step 1: a learner, which receives a snapshot and then the log.
		var err error
		if d, add, err = r.addLearnerStep(ctx, d, addNode, false); err != nil {
			return nil, err
		}
	}
	// Step 2: wait until the learner has caught up with the log.
	if err := r.waitCaughtUp(ctx, add.GetReplicaId()); err != nil {
		return nil, r.rollBackLearner(add, fmt.Errorf("learner on node %d: %w", addNode, err))
	}
	// Step 3: promote (and remove, jointly).
	changes := []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(add.GetReplicaId())}}
	transition := raftpb.ConfChangeTransitionAuto
	if removeRd != nil {
		changes = append(changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: new(removeRd.GetReplicaId())})
		transition = raftpb.ConfChangeTransitionJointImplicit
	}
	cc := &raftpb.ConfChangeV2{Transition: transition.Enum(), Changes: changes}
	nd, err := r.proposeChange(ctx, cc, d, func(nd *tidekvpb.RangeDescriptor) bool {
		a := replicaOnNode(nd, addNode)
		return a != nil && a.GetType() == tidekvpb.ReplicaType_VOTER && (removeRd == nil || replicaOnNode(nd, removeRd.GetNodeId()) == nil)
	})
	if err != nil {
		return nil, r.rollBackLearner(add, err)
	}
	return nd, nil
}

// rollBackWithin bounds the removal of a learner whose addition failed.
const rollBackWithin = 10 * time.Second

// rollBackLearner undoes the first step of a failed addition: a learner
// that was not promoted is removed, so a failed move leaves the range as
// it was (writable on the new node only once it is readable there too,
// or not at all). If this replica lost the lease, or the promotion did
// happen after all, the descriptor says so and nothing is removed; a
// learner that cannot be removed now is left to placement's clean-up of
// leftover learners. It returns cause, noting the roll-back.
func (r *Replica) rollBackLearner(learner *tidekvpb.ReplicaDescriptor, cause error) error {
	d := r.desc.Load()
	cur := replicaOnNode(d, learner.GetNodeId())
	if cur == nil || cur.GetReplicaId() != learner.GetReplicaId() || cur.GetType() != tidekvpb.ReplicaType_LEARNER || !r.isLeader.Load() {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollBackWithin)
	defer cancel()
	cc := removeChange(learner.GetReplicaId())
	_, err := r.proposeChange(ctx, cc, d, func(nd *tidekvpb.RangeDescriptor) bool {
		return replicaOnNode(nd, learner.GetNodeId()) == nil
	})
	if err != nil {
		return fmt.Errorf("%w (the learner on node %d could not be removed: %v)", cause, learner.GetNodeId(), err)
	}
	return fmt.Errorf("%w (rolled back: the learner on node %d was removed)", cause, learner.GetNodeId())
}

// AddLearner adds an adaptive learner on node: a read replica for load
// (it serves BOUNDED and ANY reads, see closed.go), which receives a
// snapshot and then the log like the first step of ChangeReplicas, but is
// never promoted and does not count towards the replication factor. It
// returns once the learner has caught up (within Config.CatchUpTimeout);
// after a timeout the learner stays in the descriptor and calling again
// waits for it anew. Remove it with ChangeReplicas(ctx, 0, node). Only the
// leaseholder runs it; one change per range at a time.
func (r *Replica) AddLearner(ctx context.Context, node uint64) (*tidekvpb.RangeDescriptor, error) {
	r.store.adminMu(r.rangeID).Lock()
	defer r.store.adminMu(r.rangeID).Unlock()
	r.changing.Add(1)
	defer r.changing.Add(-1)
	if !r.isLeader.Load() {
		return nil, r.notLeader()
	}
	if node == 0 {
		return nil, fmt.Errorf("%w: no node to add a learner on", ErrInvalidRequest)
	}
	if r.rangeID == keys.MetaRangeID {
		return nil, fmt.Errorf("%w: the meta range takes no adaptive learners", ErrInvalidRequest)
	}
	if into := r.desc.Load().GetMergingInto(); into != 0 {
		return nil, &RangeFrozenError{RangeID: r.rangeID, Into: into}
	}
	if err := r.waitDesc(ctx, func(d *tidekvpb.RangeDescriptor) bool { return !isJoint(d) }); err != nil {
		return nil, fmt.Errorf("waiting for a previous change to finish: %w", err)
	}
	d := r.desc.Load()
	rd := replicaOnNode(d, node)
	switch {
	case rd == nil:
		var err error
		if d, rd, err = r.addLearnerStep(ctx, d, node, true); err != nil {
			return nil, err
		}
	case isAdaptiveLearner(rd):
		// Already there (a retry after a timeout): wait for it again.
	case rd.GetType() == tidekvpb.ReplicaType_LEARNER:
		return nil, fmt.Errorf("%w: node %d holds the learner of an unfinished voter addition to range %d; finish or remove it first",
			ErrInvalidRequest, node, r.rangeID)
	default:
		return nil, fmt.Errorf("%w: node %d already holds a voter of range %d", ErrInvalidRequest, node, r.rangeID)
	}
	if err := r.waitCaughtUp(ctx, rd.GetReplicaId()); err != nil {
		return nil, fmt.Errorf("learner on node %d: %w", node, err)
	}
	return r.desc.Load(), nil
}

// addLearnerStep adds a learner on node to the range described by d and
// returns the descriptor after and the learner's replica. The conf change
// carries the new descriptor, so every replica learns the learner's node
// and whether it is adaptive.
func (r *Replica) addLearnerStep(ctx context.Context, d *tidekvpb.RangeDescriptor, node uint64, adaptive bool) (*tidekvpb.RangeDescriptor, *tidekvpb.ReplicaDescriptor, error) {
	nd := proto.Clone(d).(*tidekvpb.RangeDescriptor)
	add := &tidekvpb.ReplicaDescriptor{NodeId: node, ReplicaId: nd.NextReplicaId, Type: tidekvpb.ReplicaType_LEARNER, Adaptive: adaptive}
	nd.Replicas = append(nd.Replicas, add)
	nd.NextReplicaId++
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: new(add.GetReplicaId())}}}
	ctxb, err := proto.Marshal(&tidekvpb.ChangeReplicasCommand{Desc: nd})
	if err != nil {
		return nil, nil, err
	}
	cc.Context = ctxb
	if d, err = r.proposeChange(ctx, cc, d, func(nd *tidekvpb.RangeDescriptor) bool { return replicaOnNode(nd, node) != nil }); err != nil {
		return nil, nil, fmt.Errorf("adding learner on node %d: %w", node, err)
	}
	return d, replicaOnNode(d, node), nil
}

func isAdaptiveLearner(rd *tidekvpb.ReplicaDescriptor) bool {
	return rd.GetType() == tidekvpb.ReplicaType_LEARNER && rd.GetAdaptive()
}

// transferAway hands the lease to the voter that answered most recently
// (a down voter would never take it).
func (r *Replica) transferAway() error {
	d := r.desc.Load()
	var best *tidekvpb.ReplicaDescriptor
	var bestAt monoTime
	r.mu.Lock()
	for _, rd := range d.GetReplicas() {
		if rd.GetNodeId() == r.store.nodeID || rd.GetType() != tidekvpb.ReplicaType_VOTER {
			continue
		}
		if at := r.mu.lastContact[rd.GetReplicaId()]; best == nil || at > bestAt {
			best, bestAt = rd, at
		}
	}
	r.mu.Unlock()
	if best == nil {
		return fmt.Errorf("%w: range %d has no other voter to take the lease", ErrInvalidRequest, r.rangeID)
	}
	return r.TransferLease(best.GetNodeId())
}

// proposeChange proposes a conf change and waits until the applied
// descriptor satisfies done (and any joint state is left). Raft silently
// drops a conf change while another is pending, so it re-proposes after a
// while if nothing happened.
func (r *Replica) proposeChange(ctx context.Context, cc *raftpb.ConfChangeV2, from *tidekvpb.RangeDescriptor, done func(*tidekvpb.RangeDescriptor) bool) (*tidekvpb.RangeDescriptor, error) {
	deadline := time.Now().Add(r.store.cfg.CatchUpTimeout)
	for {
		if cur := r.desc.Load(); cur.GetGeneration() != from.GetGeneration() && !done(cur) {
			return nil, fmt.Errorf("range %d changed concurrently (generation %d → %d)", r.rangeID, from.GetGeneration(), cur.GetGeneration())
		}
		if _, err := r.propose(ctx, nil, cc); err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := r.waitDesc(wctx, func(d *tidekvpb.RangeDescriptor) bool { return done(d) && !isJoint(d) })
		cancel()
		if err == nil {
			return r.desc.Load(), nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, err
		}
		if !r.isLeader.Load() {
			return nil, r.notLeader()
		}
		if done(r.desc.Load()) {
			// Applied but still joint: keep waiting for the automatic leave.
			continue
		}
	}
}

// splitWaitForChange bounds how long a split waits for a replica change in
// progress on its range before it is refused as busy.
const splitWaitForChange = 5 * time.Second

// lockWithin takes mu, waiting at most d (and not past ctx).
func lockWithin(ctx context.Context, mu *sync.Mutex, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !mu.TryLock() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// ChangeInProgress reports whether this replica is running a replica
// change (ChangeReplicas or AddLearner) right now: a plain learner in its
// descriptor then belongs to that change, not to an interrupted one.
func (r *Replica) ChangeInProgress() bool { return r.changing.Load() > 0 }

func (r *Replica) waitDesc(ctx context.Context, ok func(*tidekvpb.RangeDescriptor) bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if ok(r.desc.Load()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.store.stopper:
			return ErrStopped
		case <-t.C:
		}
	}
}

var errNotCaughtUp = errors.New("learner did not catch up in time")

// learnerSilenceLimit is how long, in election timeouts, a new learner may
// go without answering the leader before the change is given up: its node
// has died or been partitioned away, and waiting out CatchUpTimeout would
// keep the range from being repaired for a minute. A live learner answers
// heartbeats even while its snapshot streams.
//
// The silence is counted in the leader's Raft ticks (learnerSilenceLimit ×
// ElectionTicks of them), the clock Raft itself judges the learner by: it
// sends the heartbeats on ticks, and its check-quorum, every ElectionTicks
// ticks, clears Progress.RecentActive for a peer that did not answer since
// the last one. Counted by the wall clock, a node whose ticks lag (a loaded
// machine) or stop would blame the learner for answers it was never asked
// for, and give up at a wall time unrelated to when Raft found it silent.
// CatchUpTimeout stays a wall-clock bound on the whole wait.
const learnerSilenceLimit = 4

// learnerWait is a replica change's wait for its learner (waitCaughtUp),
// which the scheduler judges on each tick of the leader's replica
// (judgeLearnerLocked).
type learnerWait struct {
	replicaID uint64
	// silentSince is the tick count (Replica.mu.ticks, never 0 when a
	// tick is judged) from which the learner has been found inactive on
	// every tick; 0 while it is active.
	silentSince uint64
	// silent is closed (and closed set) once the learner has been
	// inactive for learnerSilenceLimit election timeouts of ticks.
	silent chan struct{}
	closed bool
}

// judgeLearnerLocked updates the silence of the learner a replica change
// waits for, right after the replica's tick: Raft's check-quorum runs in
// that tick, so the silence starts on the very tick Raft clears the
// learner's RecentActive, and ends on the first tick that finds it set
// again (an answer since the last check-quorum). A replica that is not the
// leader has no progress to judge; waitCaughtUp sees it is not the leader.
func (r *Replica) judgeLearnerLocked() {
	w := r.mu.learnerWait
	if w == nil || w.closed {
		return
	}
	active := true
	r.mu.raw.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == w.replicaID {
			active = pr.RecentActive
		}
	})
	switch {
	case active:
		w.silentSince = 0
	case w.silentSince == 0:
		w.silentSince = r.mu.ticks
	case r.mu.ticks-w.silentSince >= learnerSilenceLimit*uint64(r.store.cfg.ElectionTicks):
		w.closed = true
		close(w.silent)
	}
}

// waitCaughtUp waits until the learner's log matches the leader's commit
// index as of when the wait began. It gives up once the learner has been
// silent for learnerSilenceLimit election timeouts of Raft ticks, or after
// CatchUpTimeout.
func (r *Replica) waitCaughtUp(ctx context.Context, replicaID uint64) error {
	deadline := time.Now().Add(r.store.cfg.CatchUpTimeout)
	w := &learnerWait{replicaID: replicaID, silent: make(chan struct{})}
	r.mu.Lock()
	r.mu.learnerWait = w
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.mu.learnerWait == w {
			r.mu.learnerWait = nil
		}
		r.mu.Unlock()
	}()
	var target uint64
	for {
		r.mu.Lock()
		if r.mu.raw == nil || r.mu.destroyed {
			r.mu.Unlock()
			return ErrStopped
		}
		st := r.mu.raw.Status()
		r.mu.Unlock()
		if st.RaftState != raft.StateLeader {
			return r.notLeader()
		}
		if target == 0 {
			target = st.GetCommit()
		}
		if pr, ok := st.Progress[replicaID]; ok && pr.Match >= target {
			return nil
		}
		if time.Now().After(deadline) {
			return errNotCaughtUp
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.store.stopper:
			return ErrStopped
		case <-w.silent:
			return fmt.Errorf("%w: the learner (replica %d) has not answered for %d election timeouts", errNotCaughtUp, replicaID, learnerSilenceLimit)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// replicationFactor is the replication factor of the range starting at
// start.
func (s *Store) replicationFactor(start []byte) int {
	if s.cfg.ReplicationFactorOf != nil {
		if rf := s.cfg.ReplicationFactorOf(start); rf > 0 {
			return rf
		}
	}
	return s.cfg.ReplicationFactor
}
