package raftstore

import (
	"log"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// run is the scheduler: one goroutine drives every replica of the node.
// Each round it collects the Ready of every scheduled replica, persists them
// all in one batch with at most one fsync (group commit across proposals
// and ranges), then sends messages, applies committed entries and advances.
func (s *Store) run() {
	defer close(s.done)
	ticker := time.NewTicker(s.cfg.TickInterval)
	defer ticker.Stop()
	for {
		tick := false
		select {
		case <-s.stopper:
			s.failAll()
			return
		case <-ticker.C:
			tick = !s.testingTicksHeld.Load()
		case <-s.wake:
		}
		started := s.rounds.Add(1)
		s.processRound(tick)
		s.deliverEarly(started)
	}
}

// deliverEarly delivers the messages held back that arrived before round
// started began (handleRaftMessage); later ones wait for the next round.
func (s *Store) deliverEarly(started uint64) {
	s.early.Lock()
	var due []*tidekvpb.RaftMessage
	kept := s.early.msgs[:0]
	for _, e := range s.early.msgs {
		if e.after < started {
			due = append(due, e.m)
		} else {
			kept = append(kept, e)
		}
	}
	s.early.msgs = kept
	s.early.Unlock()
	for _, m := range due {
		s.handleRaftMessage(m, false)
	}
}

func (s *Store) failAll() {
	for _, r := range s.Replicas() {
		r.mu.Lock()
		r.failPendingLocked(ErrAmbiguous, ErrStopped)
		r.mu.Unlock()
	}
}

type readyWork struct {
	r      *Replica
	rd     raft.Ready
	leader bool
}

func (s *Store) takeScheduled(tick bool) []*Replica {
	s.sched.Lock()
	pending := s.sched.pending
	s.sched.pending = make(map[uint64]struct{}, len(pending))
	s.sched.Unlock()
	if tick {
		return s.Replicas()
	}
	out := make([]*Replica, 0, len(pending))
	s.mu.RLock()
	for id := range pending {
		if r := s.mu.replicas[id]; r != nil {
			out = append(out, r)
		}
	}
	s.mu.RUnlock()
	return out
}

func (s *Store) processRound(tick bool) {
	replicas := s.takeScheduled(tick)
	if len(replicas) == 0 {
		return
	}
	batch := s.eng.NewBatch()
	defer batch.Close()
	var ap roundApply
	work, mustSync := s.collectReady(replicas, batch, tick, &ap)
	if len(work) == 0 {
		return
	}
	// Committed entries that are already in the stable log (always the
	// case on a leader, which counts its own copy only once written) are
	// applied, and their proposers answered, without waiting for this
	// round's fsync. A follower may learn that entries of this very Ready
	// are committed; those wait until they are written here too. Apply
	// batches are not synced: the log is the durable record and a crash
	// replays what they lost.
	early, late := splitByStable(work)
	ap.apply(s.eng, early)
	s.commitRaftState(batch, mustSync)
	// Now stable: tell the in-memory log; followers may now acknowledge.
	for _, w := range work {
		w.r.markStableLocked(&w)
	}
	ap.apply(s.eng, late)
	for _, w := range work {
		s.finishReadyLocked(&w)
		w.r.mu.Unlock()
	}
	// Create or remove replicas only after every lock of this round is
	// released: these steps may lock other replicas.
	for _, fn := range ap.post {
		fn()
	}
}

// collectReady takes the Ready of each scheduled replica that has one,
// adds its log entries and HardState to batch, and returns them with each
// replica still locked (unlocked by processRound at the round's end). It
// applies snapshots, leaving in ap the removal of the replicas they merged.
func (s *Store) collectReady(replicas []*Replica, batch storage.Batch, tick bool, ap *roundApply) (work []readyWork, mustSync bool) {
	for _, r := range replicas {
		r.mu.Lock()
		if r.mu.destroyed || r.mu.raw == nil {
			r.mu.Unlock()
			continue
		}
		r.drainInboxLocked(tick)
		r.refreshLeaseLocked()
		if tick {
			r.tendLostLocked()
		}
		if !r.mu.raw.HasReady() {
			r.mu.Unlock()
			continue
		}
		rd := r.mu.raw.Ready()
		if !raft.IsEmptySnap(rd.Snapshot) {
			if err := r.applySnapshotLocked(rd.Snapshot); err != nil {
				log.Fatalf("range %d: applying snapshot: %v", r.rangeID, err)
			}
			// Once the round's locks are released: a replica it merged
			// may be locked in this round already.
			d := r.desc.Load()
			ap.post = append(ap.post, func() { s.dropMergedInto(d) })
		}
		if err := r.persistReadyLocked(batch, &rd); err != nil {
			log.Fatalf("range %d: persisting raft state: %v", r.rangeID, err)
		}
		mustSync = mustSync || rd.MustSync
		s.stats.EntriesAppended.Add(uint64(len(rd.Entries)))
		s.stats.EntriesCommitted.Add(uint64(len(rd.CommittedEntries)))
		w := readyWork{r: r, rd: rd, leader: r.mu.raw.BasicStatus().RaftState == raft.StateLeader}
		if w.leader {
			// A leader's appends go out while it writes them itself (Raft
			// thesis §10.2.1): its own vote and term were made durable
			// when it was a candidate, and it counts its own copy of an
			// entry only once Advance reports it stable.
			r.sendMessagesLocked(rd.Messages)
		}
		work = append(work, w)
	}
	return work, mustSync
}

// splitByStable separates the Readies whose committed entries are all in
// the stable log already (early) from those that wait for this round's
// write (late).
func splitByStable(work []readyWork) (early, late []readyWork) {
	for _, w := range work {
		if n := len(w.rd.CommittedEntries); n > 0 {
			stable, _ := w.r.mu.storage.LastIndex()
			if w.rd.CommittedEntries[n-1].GetIndex() <= stable {
				early = append(early, w)
			} else {
				late = append(late, w)
			}
		}
	}
	return early, late
}

// roundApply applies committed entries in one engine batch per call and
// keeps the steps to run once the round's locks are released.
type roundApply struct {
	acks, post []func()
}

func (ap *roundApply) apply(eng storage.Engine, ws []readyWork) {
	ab := newApplyBatch(eng)
	for _, w := range ws {
		a, p := w.r.applyCommittedLocked(ab, w.rd.CommittedEntries)
		ap.acks, ap.post = append(ap.acks, a...), append(ap.post, p...)
	}
	if err := ab.commit(); err != nil {
		log.Fatalf("apply commit: %v", err)
	}
	for _, fn := range ap.acks {
		fn()
	}
	ap.acks = ap.acks[:0]
}

// commitRaftState writes the round's log entries and HardStates, synced
// when a Ready asked for it.
func (s *Store) commitRaftState(batch storage.Batch, mustSync bool) {
	if !batch.Empty() {
		start := time.Now()
		if err := batch.Commit(mustSync); err != nil {
			// Losing Raft state silently would break durability; stop hard.
			log.Fatalf("raft state commit: %v", err)
		}
		if mustSync {
			s.stats.Syncs.Add(1)
			s.stats.SyncNanos.Add(uint64(time.Since(start)))
		}
	}
	s.stats.Rounds.Add(1)
}

// markStableLocked tells the in-memory log what the round wrote; a
// follower's messages (its acknowledgements) go out only now.
func (r *Replica) markStableLocked(w *readyWork) {
	if len(w.rd.Entries) > 0 {
		if err := r.mu.storage.Append(w.rd.Entries); err != nil {
			log.Fatalf("range %d: append: %v", r.rangeID, err)
		}
	}
	if !raft.IsEmptyHardState(w.rd.HardState) {
		_ = r.mu.storage.SetHardState(w.rd.HardState)
	}
	if !w.leader {
		r.sendMessagesLocked(w.rd.Messages)
	}
}

// finishReadyLocked advances w's replica past its Ready.
func (s *Store) finishReadyLocked(w *readyWork) {
	r := w.r
	if r.mu.destroyed {
		return
	}
	r.applied.Store(r.mu.state.GetAppliedIndex())
	r.updateLeadershipLocked(w.rd.SoftState)
	r.handleReadStatesLocked(w.rd.ReadStates)
	r.releaseReadsLocked()
	r.mu.raw.Advance(w.rd)
	r.maybeTruncateLogLocked()
	if r.mu.raw.HasReady() {
		s.schedule(r.rangeID)
	}
}

// persistReadyLocked adds the Ready's log entries and HardState to batch.
func (r *Replica) persistReadyLocked(b storage.Writer, rd *raft.Ready) error {
	if len(rd.Entries) > 0 {
		// A new leader may overwrite a suffix of our log: drop anything past
		// the last new entry so a restart cannot resurrect it.
		last := rd.Entries[len(rd.Entries)-1].GetIndex()
		if prevLast, _ := r.mu.storage.LastIndex(); prevLast > last {
			_, hi := keys.LogSpan(r.rangeID)
			if err := b.DeleteRange(keys.LogKey(r.rangeID, last+1), hi); err != nil {
				return err
			}
		}
		for _, e := range rd.Entries {
			if err := putProto(b, keys.LogKey(r.rangeID, e.GetIndex()), e); err != nil {
				return err
			}
		}
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := putProto(b, keys.HardStateKey(r.rangeID), rd.HardState); err != nil {
			return err
		}
	}
	return nil
}

func (r *Replica) sendMessagesLocked(msgs []*raftpb.Message) {
	for _, m := range msgs {
		to := r.mu.peerNodes[m.GetTo()]
		if to == 0 {
			continue
		}
		rm := &tidekvpb.RaftMessage{RangeId: r.rangeID, FromNodeId: r.store.nodeID, ToNodeId: to, Message: m, DataLost: r.lost.Load()}
		if m.GetType() == raftpb.MsgTimeoutNow {
			// The lease is void already: no read is served under it after
			// this (readOrder.handoff).
			rm.LeaseHandoff = tidekvpb.FromHLC(r.order.handoff())
		}
		if m.GetType() == raftpb.MsgSnap {
			r.sendSnapshotLocked(rm)
			continue
		}
		// A heartbeat's contact counts from before the send: a pause
		// inside Send must not move the lease's start later.
		var at monoTime
		if m.GetType() == raftpb.MsgHeartbeat {
			at = monoNow()
		}
		sent := r.store.transport.Send(rm)
		if sent {
			r.store.stats.MessagesSent.Add(1)
		} else {
			r.store.stats.MessagesDropped.Add(1)
		}
		switch {
		case sent && m.GetType() == raftpb.MsgHeartbeat:
			r.heartbeatSentLocked(m.GetTo(), at)
		case !sent && m.GetType() == raftpb.MsgApp:
			r.mu.raw.ReportUnreachable(m.GetTo())
		case sent && m.GetType() == raftpb.MsgTimeoutNow:
			r.timeoutNowSentLocked(m)
		}
	}
}

// maybeTruncateLogLocked drops applied entries beyond the configured tail.
// Truncation is local to each replica; a follower that falls behind the
// leader's truncation point receives a snapshot.
func (r *Replica) maybeTruncateLogLocked() {
	st := r.mu.state
	keep := r.store.cfg.LogKeepEntries
	if st.GetAppliedIndex() < st.GetTruncatedIndex()+2*keep {
		return
	}
	idx := st.GetAppliedIndex() - keep
	term, err := r.mu.storage.Term(idx)
	if err != nil {
		return
	}
	b := r.store.eng.NewBatch()
	defer b.Close()
	nst := proto.Clone(st).(*tidekvpb.ReplicaState)
	nst.TruncatedIndex, nst.TruncatedTerm = idx, term
	lo, _ := keys.LogSpan(r.rangeID)
	_ = b.DeleteRange(lo, keys.LogKey(r.rangeID, idx+1))
	if err := putProto(b, keys.ReplicaStateKey(r.rangeID), nst); err != nil {
		return
	}
	if err := b.Commit(false); err != nil {
		return
	}
	r.mu.state = nst
	_ = r.mu.storage.Compact(idx)
}
