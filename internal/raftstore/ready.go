package raftstore

import (
	"log"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
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
			tick = s.tickDue()
		case <-s.wake:
		}
		started := s.rounds.Add(1)
		s.processRound(tick)
		s.deliverEarly(started)
	}
}

// tickDue reports whether a tick of the ticker is delivered: always,
// unless a test holds the store's ticks, and then only those it lends
// (testingTicksLent, taken here on the scheduler's goroutine alone).
func (s *Store) tickDue() bool {
	if !s.testingTicksHeld.Load() {
		return true
	}
	if s.testingTicksLent.Load() > 0 {
		s.testingTicksLent.Add(-1)
		return true
	}
	return false
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

// readyWork is a replica's Ready taken this round, with its
// MsgStorageApply (nil if nothing was committed).
type readyWork struct {
	r     *Replica
	rd    raft.Ready
	apply *raftpb.Message
}

// takeScheduled returns the replicas scheduled for this round, appended
// to out.
func (s *Store) takeScheduled(tick bool, out []*Replica) []*Replica {
	// Two sets take turns: the one taken here is emptied and becomes the
	// next round's, so a round makes no new map (only the scheduler's
	// goroutine calls this).
	s.sched.Lock()
	pending := s.sched.pending
	s.sched.pending, s.sched.spare = s.sched.spare, nil
	s.sched.Unlock()
	defer func() {
		clear(pending)
		s.sched.Lock()
		s.sched.spare = pending
		s.sched.Unlock()
	}()
	if tick {
		return s.Replicas()
	}
	s.mu.RLock()
	for id := range pending {
		if r := s.mu.replicas[id]; r != nil {
			out = append(out, r)
		}
	}
	s.mu.RUnlock()
	return out
}

// processRound takes the Ready of every scheduled replica, hands their log
// writes to the log writer (logwriter.go), sends their messages, and
// applies the committed entries, all without waiting on a disk: the
// replicas' locks are held only for this CPU work. Raft hands out for
// apply only entries that are committed and durable in the local log
// (AsyncStorageWrites), so apply batches are not synced: the log is the
// durable record and a crash replays what they lost.
func (s *Store) processRound(tick bool) {
	bufs := &s.roundBufs
	replicas := s.takeScheduled(tick, bufs.replicas[:0])
	var work []readyWork
	var appends []logWrite
	defer func() { bufs.keep(replicas, work, appends) }()
	if len(replicas) == 0 {
		return
	}
	ap := &s.round
	ap.begin()
	work, appends = s.collectReady(replicas, tick, ap, bufs.work[:0], bufs.appends[:0])
	// The disk works on this round's log writes while we apply.
	s.logw.enqueue(appends)
	if len(work) == 0 {
		return
	}
	if ap.apply(s.eng, work) {
		s.stats.ApplyBatches.Add(1)
	}
	for _, w := range work {
		s.finishReadyLocked(&w)
		w.r.mu.Unlock()
	}
	s.stats.Rounds.Add(1)
	// Create or remove replicas only after every lock of this round is
	// released: these steps may lock other replicas.
	for _, fn := range ap.post {
		fn()
	}
}

// collectReady takes the Ready of each scheduled replica that has one,
// sends its messages to other replicas at once (a leader's appends go out
// while it writes them itself, Raft thesis §10.2.1: it counts its own copy
// of an entry only once the log writer reports it durable), and returns
// the Readies with each replica still locked (unlocked by processRound at
// the round's end) and the log writes for the writer. A snapshot is
// applied here, leaving in ap the removal of the replicas it merged.
func (s *Store) collectReady(replicas []*Replica, tick bool, ap *roundApply, work []readyWork, appends []logWrite) ([]readyWork, []logWrite) {
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
		w := readyWork{r: r, rd: r.mu.raw.Ready()}
		s.stats.Readies.Add(1)
		s.stats.EntriesAppended.Add(uint64(len(w.rd.Entries)))
		s.stats.EntriesCommitted.Add(uint64(len(w.rd.CommittedEntries)))
		remote := s.roundBufs.remote[:0]
		for _, m := range w.rd.Messages {
			switch m.GetTo() {
			case raft.LocalAppendThread:
				if m.GetSnapshot() != nil {
					s.appendSnapshotLocked(r, m, ap)
				} else {
					appends = append(appends, r.logWriteLocked(m, &w.rd))
				}
			case raft.LocalApplyThread:
				w.apply = m
			default:
				remote = append(remote, m)
			}
		}
		r.sendMessagesLocked(remote)
		s.roundBufs.remote = emptiedSlice(remote)
		work = append(work, w)
	}
	return work, appends
}

// appendSnapshotLocked writes a MsgStorageAppend that carries a snapshot,
// on the scheduler and synced: installing a snapshot replaces the range's
// log and data, so the writer first finishes what it holds (r's earlier
// writes among it, whose responses are delivered first, in order).
// Snapshots are rare; every other log write goes through the writer.
func (s *Store) appendSnapshotLocked(r *Replica, m *raftpb.Message, ap *roundApply) {
	s.logw.flush()
	r.takeWrittenLocked()
	if err := r.applySnapshotLocked(m.GetSnapshot()); err != nil {
		log.Fatalf("range %d: applying snapshot: %v", r.rangeID, err)
	}
	// Once the round's locks are released: a replica it merged may be
	// locked in this round already.
	d := r.desc.Load()
	ap.post = append(ap.post, func() { s.dropMergedInto(d) })
	// The snapshot cleared the log: nothing is left to truncate.
	r.mu.logLast = m.GetSnapshot().GetMetadata().GetIndex()
	if n := len(m.GetEntries()); n > 0 {
		r.mu.logLast = m.GetEntries()[n-1].GetIndex()
	}
	b := s.eng.NewBatch()
	defer b.Close()
	if err := persistAppend(b, &encoder{}, r.rangeID, m, false, r.hardStateDurableLocked(m)); err != nil {
		log.Fatalf("range %d: persisting raft state: %v", r.rangeID, err)
	}
	if err := b.Commit(true); err != nil {
		log.Fatalf("raft state commit: %v", err)
	}
	r.logDurableLocked(m)
}

// roundBufs are the scheduler's slices, kept from round to round so that
// a round makes none (the log writer copies the appends it is given).
type roundBufs struct {
	replicas []*Replica
	work     []readyWork
	appends  []logWrite
	// remote collects a Ready's messages to other replicas (collectReady),
	// durable a durable append's (logDurableLocked): two, because a
	// snapshot's append finishes inside collectReady's loop.
	remote, durable []*raftpb.Message
}

// keep takes a round's slices back, emptied: what they held is let go.
func (b *roundBufs) keep(replicas []*Replica, work []readyWork, appends []logWrite) {
	clear(replicas)
	clear(work)
	clear(appends)
	b.replicas, b.work, b.appends = replicas[:0], work[:0], appends[:0]
}

// roundApply applies committed entries in one engine batch per call and
// keeps the steps to run once the round's locks are released.
type roundApply struct {
	post []func()
	// ab is the apply batch, reused from round to round.
	ab *applyBatch
}

// begin starts a round: nothing is carried over from the last.
func (ap *roundApply) begin() {
	clear(ap.post)
	ap.post = ap.post[:0]
}

// apply applies the committed entries of ws in one engine batch and
// reports whether it made one.
func (ap *roundApply) apply(eng storage.Engine, ws []readyWork) bool {
	if !slices.ContainsFunc(ws, func(w readyWork) bool { return w.apply != nil }) {
		return false // a round that only appended or sent: no engine batch to make
	}
	if ap.ab == nil {
		ap.ab = newApplyBatch(eng)
	} else {
		ap.ab.reuse()
	}
	ab := ap.ab
	for _, w := range ws {
		if w.apply == nil {
			continue
		}
		ap.post = append(ap.post, w.r.applyCommittedLocked(ab, w.apply.GetEntries())...)
	}
	if err := ab.commit(); err != nil {
		log.Fatalf("apply commit: %v", err)
	}
	ab.settle() // before the answers: a proposer done counts on its bytes being in
	ab.answer()
	return true
}

// finishReadyLocked tells w's replica what the round applied and publishes
// what changed.
func (s *Store) finishReadyLocked(w *readyWork) {
	r := w.r
	if r.mu.destroyed {
		return
	}
	if w.apply != nil {
		for _, resp := range w.apply.GetResponses() {
			_ = r.mu.raw.Step(resp)
		}
	}
	r.applied.Store(r.mu.state.GetAppliedIndex())
	r.updateLeadershipLocked(w.rd.SoftState)
	r.handleReadStatesLocked(w.rd.ReadStates)
	r.releaseReadsLocked()
	r.releaseTimeoutNowLocked()
	r.maybeTruncateLogLocked()
	if r.mu.raw.HasReady() {
		s.schedule(r.rangeID)
	}
}

func (r *Replica) sendMessagesLocked(msgs []*raftpb.Message) {
	var held heldOnce
	// The envelopes in one array: a leader's Ready addresses each
	// follower. The transport may hold one after Send returns; none is
	// reused.
	envs := make([]tidekvpb.RaftMessage, len(msgs))
	for i, m := range msgs {
		if m.GetType() == raftpb.MsgTimeoutNow && r.holdTimeoutNowLocked(m) {
			continue
		}
		rm := &envs[i]
		if !r.envelopeLocked(rm, m, &held) {
			continue
		}
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
		r.store.countSent(sent)
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

// holdTimeoutNowLocked keeps back a MsgTimeoutNow while this leader has
// not applied everything it appended, and reports whether it did. Raft
// sends it as soon as the transferee's log matches the leader's, and with
// the leader's own write still in the log writer the entries may not be
// committed yet: the transferee would take over and commit them in its
// term, and this leader, stepping down, would answer their proposers
// "ambiguous". Held, the transfer starts once they are applied and
// answered; raft takes no proposal meanwhile (it is transferring).
func (r *Replica) holdTimeoutNowLocked(m *raftpb.Message) bool {
	if r.mu.state.GetAppliedIndex() >= r.mu.logLast {
		return false
	}
	r.mu.heldTimeoutNow = m
	return true
}

// releaseTimeoutNowLocked sends the held MsgTimeoutNow once its wait is
// over, or drops it if the transfer it belongs to is (raft gave it up, or
// this replica no longer leads in its term).
func (r *Replica) releaseTimeoutNowLocked() {
	m := r.mu.heldTimeoutNow
	if m == nil {
		return
	}
	bs := r.mu.raw.BasicStatus()
	switch {
	case bs.RaftState != raft.StateLeader || bs.GetTerm() != m.GetTerm() || bs.LeadTransferee != m.GetTo():
		r.mu.heldTimeoutNow = nil
	case r.mu.state.GetAppliedIndex() >= r.mu.logLast:
		r.mu.heldTimeoutNow = nil
		r.sendMessagesLocked([]*raftpb.Message{m})
	}
}

// envelopeLocked addresses m to its replica's node in rm; false if the
// node is unknown. held is shared by the messages sent together.
func (r *Replica) envelopeLocked(rm *tidekvpb.RaftMessage, m *raftpb.Message, held *heldOnce) bool {
	to := r.mu.peerNodes[m.GetTo()]
	if to == 0 {
		return false
	}
	*rm = tidekvpb.RaftMessage{RangeId: r.rangeID, FromNodeId: r.store.nodeID, ToNodeId: to, Message: m, DataLost: r.lost.Load()}
	if t := m.GetType(); t == raftpb.MsgApp || t == raftpb.MsgHeartbeat {
		// A follower learns from these what it may truncate: it cannot
		// know what the other replicas hold. Heartbeats carry it to a
		// range that no longer writes.
		rm.LogHeldByAll = held.get(r)
	}
	return true
}

// heldOnce is heldByAllLocked computed at most once for the messages of a
// Ready, which a leader sends to every follower: sending them changes
// neither what this replica applied nor any replica's Match, so each
// MsgApp and heartbeat would compute the same value.
type heldOnce struct {
	v  uint64
	ok bool
}

func (h *heldOnce) get(r *Replica) uint64 {
	if !h.ok {
		h.v, h.ok = r.heldByAllLocked(), true
	}
	return h.v
}

// countSent counts a message handed to the transport (sent) or refused.
func (s *Store) countSent(sent bool) {
	if sent {
		s.stats.MessagesSent.Add(1)
	} else {
		s.stats.MessagesDropped.Add(1)
	}
}

// maybeTruncateLogLocked drops applied entries beyond the configured tail,
// and also every applied entry all replicas already hold: a leader knows
// which from its followers' progress, a follower from what its leader
// tells it (heldByAllLocked). Truncation is local to each replica; a
// follower that falls behind the truncation point of its leader (this
// one, or a later one that truncated as a follower) receives a snapshot.
func (r *Replica) maybeTruncateLogLocked() {
	st := r.mu.state
	keep := r.store.cfg.LogKeepEntries
	var idx uint64
	if st.GetAppliedIndex() >= st.GetTruncatedIndex()+2*keep {
		idx = st.GetAppliedIndex() - keep
	}
	// The log lives in memory (raft.MemoryStorage) as well as on disk, so
	// the count rule alone lets a node with many ranges, each written less
	// than 2×LogKeepEntries times, hold every entry it ever wrote: a
	// one-node cluster loading 300k records grew its heap by the records'
	// size. Entries every replica has are needed by none of them. With
	// three replicas a range's followers held up to 2×LogKeepEntries each
	// until they truncated so too.
	if held := r.heldByAllLocked(); held >= st.GetTruncatedIndex()+logTruncateBatch && held > idx {
		idx = held
	}
	if idx == 0 {
		return
	}
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

// logTruncateBatch is the fewest entries truncated at once for being held
// by all replicas: each truncation is a write of its own.
const logTruncateBatch = 64

// heldByAllLocked is the highest index this replica has applied that every
// replica of the range (learners too) has in its log: on a leader from
// their Match, elsewhere from the last leader's word (leaderHeld). A
// follower's applied entries are committed, so every later leader has them
// too: truncating them is as safe as a leader's own truncation.
func (r *Replica) heldByAllLocked() uint64 {
	held := r.mu.state.GetAppliedIndex()
	if r.mu.raw.BasicStatus().RaftState != raft.StateLeader {
		return min(held, r.mu.leaderHeld)
	}
	r.mu.raw.WithProgress(func(_ uint64, _ raft.ProgressType, pr tracker.Progress) {
		held = min(held, pr.Match)
	})
	return held
}
