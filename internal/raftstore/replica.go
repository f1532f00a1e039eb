package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/storage"
)

// Replica is this node's member of one range's Raft group.
//
// Request goroutines never touch the RawNode: they queue proposals, reads and
// messages under in.Mutex and wake the scheduler, which owns mu and drives
// Raft. Hot-path facts (descriptor, leadership) are published through
// atomics so routing checks need no lock.
type Replica struct {
	store   *Store
	rangeID uint64

	desc       atomic.Pointer[tidekvpb.RangeDescriptor] // nil while uninitialized
	leaderNode atomic.Uint64                            // 0 when unknown
	isLeader   atomic.Bool
	// leaderTerm is the Raft term this replica has led since (0 while it
	// does not lead): load samples belong to the lease that produced them.
	leaderTerm atomic.Uint64
	applied    atomic.Uint64
	// The leader lease (see lease.go): until leaseExpiry (a monoTime) the
	// leader may serve reads from local state once it has applied
	// leaseIndex, the first index committed in its term or later.
	leaseExpiry atomic.Int64
	leaseIndex  atomic.Uint64
	// requests counts KV requests served here, for per-range load; load
	// samples their keys (splitkeys.go).
	requests atomic.Uint64
	reads    atomic.Uint64
	// spanChanges counts changes of the descriptor's span (SpanChanges).
	spanChanges atomic.Uint64
	load        loadSampler
	// layout is how reads find the range's data (layout.go); never nil.
	layout atomic.Pointer[layoutView]
	// gcThreshold is the range's GC threshold as reads check it
	// (mvccgc.go); never nil once the replica has state.
	gcThreshold atomic.Pointer[hlc.Timestamp]
	// mayHoldIntents mirrors ReplicaState.may_hold_intents for a merge,
	// which reads it from the frozen right-hand replica.
	mayHoldIntents atomic.Bool
	// lost: the data went with a restart (a memory range) and the range
	// has not repaired it yet; repairing: a repair step runs in the
	// background (volatile.go).
	lost, repairing atomic.Bool
	// versionBound is mu.versionBound as last persisted (versionbound.go).
	versionBound atomic.Pointer[versionBound]
	// closed is the newest closed timestamp known (closed.go).
	closed atomic.Pointer[closedTS]
	// order holds the leaseholder's timestamp cache and latches
	// (readorder.go).
	order *readOrder
	// changing counts replica changes running on this replica (admin.go).
	changing atomic.Int32
	// written counts the engine bytes the data commands applied here
	// stored, for the range size estimate (WrittenBytes); snapshots counts
	// the snapshots installed, which replace the data without a put.
	written, snapshots atomic.Uint64

	in struct {
		sync.Mutex
		msgs []*raftpb.Message
		// written holds the MsgStorageAppends the log writer made
		// durable, in order (logwriter.go).
		written []*raftpb.Message
		props   []*proposal
		reads   []*readWaiter
		// campaign asks the scheduler to start an election (fresh ranges).
		campaign bool
		// closed: the replica was destroyed; nothing queued here would
		// ever be picked up.
		closed   bool
		transfer uint64
	}

	mu struct {
		sync.Mutex
		raw     *raft.RawNode
		storage *raftStorage
		state   *tidekvpb.ReplicaState
		// versionBound bounds the timestamps of the range's versions
		// (versionbound.go), kept as writes apply.
		versionBound versionBound
		// boundScan re-establishes an unknown versionBound over a GC
		// pass (versionbound.go).
		boundScan boundScan
		// logLast is the last log index written or queued for the log
		// writer.
		logLast uint64
		// termVote is the term and vote of the last HardState on disk or
		// queued for it (hardStateDurableLocked).
		termVote  [2]uint64
		replicaID uint64
		destroyed bool
		// removalPending: a conf change removed this replica; it is
		// destroyed once the current round is written.
		removalPending bool
		// proposals awaiting application, by proposal ID.
		proposals map[uint64]*proposal
		// read batches awaiting their ReadIndex, by request context.
		readBatches map[uint64][]*readWaiter
		nextReadID  uint64
		// reads whose index is known, waiting for apply.
		applyWaiters []indexedReads
		// peerNodes maps replica IDs to node IDs, from the descriptor and,
		// for IDs it does not name yet, from incoming messages (an
		// uninitialized replica has no descriptor).
		peerNodes map[uint64]uint64
		// peerLost: whether each peer said, in its latest message since
		// this replica last became leader, that its data is lost
		// (volatile.go).
		peerLost map[uint64]bool
		// outgoingSnaps holds engine snapshots taken when Raft asked for a
		// snapshot, until the MsgSnap is handed to the sender.
		outgoingSnaps map[uint64]storage.Snapshot
		// incomingSST holds received SST files by snapshot index.
		incomingSST map[uint64]stagedSST
		lastLeader  uint64
		// leaseTerm is the term leaseIndex belongs to.
		leaseTerm uint64
		// lastContact: for each peer, when this leader sent the latest
		// heartbeat the peer has acknowledged (lease.go).
		lastContact map[uint64]monoTime
		// timeoutNow: when this leader last sent a MsgTimeoutNow to each
		// transferee in term timeoutNowTerm, until the transferee answers
		// a later heartbeat (lease.go).
		timeoutNow     map[uint64]monoTime
		timeoutNowTerm uint64
		// heldTimeoutNow is a MsgTimeoutNow waiting for this leader to
		// apply what it has appended (holdTimeoutNowLocked).
		heldTimeoutNow *raftpb.Message
		// spare holds the inbox's slices as the scheduler last drained
		// them, emptied, to be handed back to the inbox at the next drain:
		// queuing into a slice with room makes no new array (otherwise
		// one per round for each kind, and one per durable log write).
		spare struct {
			msgs, written []*raftpb.Message
			props         []*proposal
		}
		// heartbeatsSent: send times of heartbeats not yet acknowledged,
		// per peer, oldest first.
		heartbeatsSent map[uint64][]monoTime
		// leaderHeld is the highest index a leader has said every
		// replica holds (RaftMessage.log_held_by_all): a follower
		// truncates its log to it (maybeTruncateLogLocked).
		leaderHeld uint64
		// ticks counts the Raft ticks this replica has taken: the clock
		// of Raft's timers, which lags the wall clock on a loaded node
		// and stops while a test holds the store's ticks.
		ticks uint64
		// learnerWait is the learner a replica change waits for
		// (waitCaughtUp), judged on each tick (judgeLearnerLocked).
		learnerWait *learnerWait
	}
}

type proposal struct {
	id   uint64
	data []byte
	// cc is set for conf changes.
	cc   *raftpb.ConfChangeV2
	done chan applyResult
	// batchable: the command may share a Raft entry (batch.go).
	batchable bool
	// latch, when set, is held in order until the proposal is answered.
	latch *latch
	order *readOrder
}

// refuse answers a proposal that never reached Raft.
func (p *proposal) refuse(err error) (applyResult, error) {
	p.finish(applyResult{err: err})
	return applyResult{}, err
}

// finish answers the proposer and releases the proposal's latch.
func (p *proposal) finish(res applyResult) {
	if p.latch != nil {
		p.order.release(p.latch, errors.Is(res.err, ErrAmbiguous))
	}
	p.done <- res
}

type readWaiter struct {
	done chan error
}

type indexedReads struct {
	index uint64
	reads []*readWaiter
}

// applyResult is what applying a command produced for its proposer.
type applyResult struct {
	err     error
	deleted bool
	cas     *tidekvpb.CompareAndSetResponse
	write   *tidekvpb.WriteResponse // guarded writes and want_existed
	split   *tidekvpb.SplitResponse
	metaID  uint64
	newDesc *tidekvpb.RangeDescriptor
	gc      *gcApplied
	txn     *txnResult
}

// RangeID returns the range this replica belongs to.
func (r *Replica) RangeID() uint64 { return r.rangeID }

// WrittenBytes is the total engine key and value bytes the data commands
// (writes, CAS, transaction steps, a layout migration) this replica has
// applied since it was loaded have stored: every version, tombstone,
// intent and record, counted once the engine holds them. It bounds how much the range's stored data (what a
// snapshot ships, DataSize) can have grown meanwhile (an overwrite of a
// record or an intent cleared counts as growth), which the server adds to
// its last exact count. It moves with every write, so a count is known to
// be exact when it has not moved since.
func (r *Replica) WrittenBytes() uint64 { return r.written.Load() }

// SnapshotsApplied counts the snapshots this replica has installed since it
// was loaded: each replaces its data wholesale, so a size counted before
// one says nothing after it.
func (r *Replica) SnapshotsApplied() uint64 { return r.snapshots.Load() }

// Desc returns the replica's current descriptor (nil if uninitialized).
func (r *Replica) Desc() *tidekvpb.RangeDescriptor { return r.desc.Load() }

// IsLeader reports whether this replica holds the range's lease.
func (r *Replica) IsLeader() bool { return r.isLeader.Load() }

// LeaderTerm is the Raft term this replica has led since, 0 while it does
// not lead. Two samples with the same non-zero LeaderTerm were taken under
// one uninterrupted lease.
func (r *Replica) LeaderTerm() uint64 { return r.leaderTerm.Load() }

// CountRead records that one of the requests counted was a read.
func (r *Replica) CountRead() { r.reads.Add(1) }

// Reads is the number of reads this replica has served.
func (r *Replica) Reads() uint64 { return r.reads.Load() }

// Requests is the number of KV requests this replica has served.
func (r *Replica) Requests() uint64 { return r.requests.Load() }

// SpanChanges counts the changes of the replica's key span (a split or
// merge applied, a snapshot of another span) since it was loaded: a
// split and a merge back between two load samples leave the span as it
// was, yet Requests missed what the right-hand side served meanwhile.
// Replica changes leave it as it is.
func (r *Replica) SpanChanges() uint64 { return r.spanChanges.Load() }

// LeaderNodeID returns the node of the current leader, 0 if unknown.
func (r *Replica) LeaderNodeID() uint64 { return r.leaderNode.Load() }

func (r *Replica) notLeader() error {
	return &NotLeaderError{RangeID: r.rangeID, LeaderNodeID: r.leaderNode.Load(), Desc: r.desc.Load()}
}

func newRaftConfig(c *Config, id uint64, st raft.Storage, applied uint64) *raft.Config {
	return &raft.Config{
		ID:                        id,
		ElectionTick:              c.ElectionTicks,
		HeartbeatTick:             c.HeartbeatTicks,
		Storage:                   st,
		Applied:                   applied,
		MaxSizePerMsg:             c.MaxSizePerMsg,
		MaxCommittedSizePerReady:  4 * c.MaxSizePerMsg,
		MaxUncommittedEntriesSize: c.MaxUncommittedBytes,
		MaxInflightMsgs:           c.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		// Reads the lease (lease.go) does not cover confirm
		// leadership with a quorum heartbeat round. Raft's own lease-based
		// ReadIndex is not safe: under CheckQuorum a partitioned leader
		// keeps leading for up to two election timeouts, while the others
		// may elect a new leader after one (see
		// TestLinearizabilityDeposedLeaseholder).
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		// Log writes go to the store's log writer and committed entries
		// to the round's apply (logwriter.go, ready.go).
		AsyncStorageWrites: true,
		Logger:             raftLogger,
	}
}

// initRaftLocked (re)creates the RawNode from ms and state.
func (r *Replica) initRaftLocked(replicaID uint64, ms *raft.MemoryStorage, st *tidekvpb.ReplicaState) error {
	r.mu.replicaID = replicaID
	r.mu.storage = &raftStorage{MemoryStorage: ms, snapshot: r.snapshotLocked}
	r.mu.state = st
	raw, err := raft.NewRawNode(newRaftConfig(&r.store.cfg, replicaID, r.mu.storage, st.GetAppliedIndex()))
	if err != nil {
		return err
	}
	r.mu.raw = raw
	r.mu.logLast, _ = ms.LastIndex()
	hs, _, _ := ms.InitialState()
	r.mu.termVote = [2]uint64{hs.GetTerm(), hs.GetVote()}
	r.applied.Store(st.GetAppliedIndex())
	r.publishLayoutLocked()
	r.publishGCThresholdLocked()
	r.mayHoldIntents.Store(st.GetMayHoldIntents())
	r.loadVersionBoundLocked()
	if st.GetDesc() != nil {
		r.setDescLocked(st.GetDesc())
	}
	return nil
}

// learnPeerLocked records a sender's node for a replica ID the replica
// has no address for yet. A replica ID never moves to another node, so
// an address once known (above all from a descriptor) is never replaced
// by what a message claims: one misattributed message cannot redirect a
// replica's traffic.
func (r *Replica) learnPeerLocked(id, node uint64) {
	if _, ok := r.mu.peerNodes[id]; !ok && node != 0 {
		r.mu.peerNodes[id] = node
	}
}

func (r *Replica) setDescLocked(d *tidekvpb.RangeDescriptor) {
	if old := r.desc.Load(); old != nil && (!bytes.Equal(old.GetStartKey(), d.GetStartKey()) || !bytes.Equal(old.GetEndKey(), d.GetEndKey())) {
		r.spanChanges.Add(1)
	}
	r.mu.state.Desc = d
	r.desc.Store(d)
	for _, rd := range d.GetReplicas() {
		r.mu.peerNodes[rd.GetReplicaId()] = rd.GetNodeId()
	}
}

// snapshotLocked is raft.Storage.Snapshot: Raft wants to send a snapshot,
// so capture the engine at the applied index. Called by Raft with mu held.
func (r *Replica) snapshotLocked() (*raftpb.Snapshot, error) {
	st := r.mu.state
	idx := st.GetAppliedIndex()
	if idx != r.applied.Load() {
		// Called in the middle of an apply (a replica change's
		// ApplyConfChange may send a snapshot): the index counts entries
		// whose writes are still in the uncommitted apply batch, which
		// the engine snapshot would not hold. Raft asks again later.
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	term, err := r.mu.storage.Term(idx)
	if err != nil {
		return nil, err
	}
	vb := versionBoundOf(st)
	data, err := proto.Marshal(&tidekvpb.SnapshotData{Desc: st.GetDesc(), Layout: st.GetLayout(), GcThreshold: st.GetGcThreshold(),
		VersionBound: logTimestamp(vb.ts), VersionBoundKnown: vb.known, MayHoldIntents: st.GetMayHoldIntents()})
	if err != nil {
		return nil, err
	}
	if old := r.mu.outgoingSnaps[idx]; old != nil {
		old.Close()
	}
	r.mu.outgoingSnaps[idx] = r.store.eng.NewSnapshot()
	return &raftpb.Snapshot{
		Data: data,
		Metadata: &raftpb.SnapshotMetadata{
			Index:     new(idx),
			Term:      new(term),
			ConfState: proto.Clone(st.GetConfState()).(*raftpb.ConfState),
		},
	}, nil
}

// enqueue helpers: called from any goroutine.

func (r *Replica) enqueueMsg(m *raftpb.Message) {
	r.in.Lock()
	r.in.msgs = append(r.in.msgs, m)
	r.in.Unlock()
	r.store.schedule(r.rangeID)
}

// propose submits a command and waits for its application.
func (r *Replica) propose(ctx context.Context, cmd *tidekvpb.RaftCommand, cc *raftpb.ConfChangeV2) (applyResult, error) {
	return r.proposeLatched(ctx, cmd, cc, nil)
}

// proposeLatched is propose for a command that holds l (nil: none) until
// it is answered.
func (r *Replica) proposeLatched(ctx context.Context, cmd *tidekvpb.RaftCommand, cc *raftpb.ConfChangeV2, l *latch) (applyResult, error) {
	p := &proposal{id: r.store.nextProposalID(), cc: cc, done: make(chan applyResult, 1), latch: l, order: r.order}
	if !r.isLeader.Load() {
		return p.refuse(r.notLeader())
	}
	if err := ctx.Err(); err != nil {
		// Its caller gave up (an attempt's deadline passed and it may have
		// tried again): proposed now, nobody would hear the answer, and it
		// could apply after what the caller did next, such as a heartbeat
		// after its transaction's record was removed.
		return p.refuse(err)
	}
	if r.lost.Load() && cmd.GetResetLost() == nil {
		// Its answers would come from data it no longer has.
		return p.refuse(&DataLostError{RangeID: r.rangeID})
	}
	if cmd != nil {
		cmd.ProposalId = p.id
		data, err := proto.Marshal(cmd)
		if err != nil {
			return p.refuse(err)
		}
		p.data = data
		p.batchable = batchable(cmd)
	}
	r.in.Lock()
	if r.in.closed {
		r.in.Unlock()
		return p.refuse(&RangeNotFoundError{RangeID: r.rangeID})
	}
	if len(r.in.props) >= r.store.cfg.MaxPendingProposals {
		r.in.Unlock()
		return p.refuse(ErrOverloaded)
	}
	r.in.props = append(r.in.props, p)
	r.in.Unlock()
	r.store.schedule(r.rangeID)
	select {
	case res := <-p.done:
		return res, res.err
	case <-ctx.Done():
		// The command may still commit; the caller cannot know. Its entry
		// in mu.proposals goes when it applies or leadership changes (the
		// buffered channel never blocks the scheduler).
		return applyResult{}, ErrAmbiguous
	case <-r.store.stopper:
		return applyResult{}, ErrAmbiguous
	}
}

// waitLeaseRead blocks until a read issued now may be served from local
// state linearizably: the leader confirms its commit index under its lease
// and the replica applies up to it.
func (r *Replica) waitLeaseRead(ctx context.Context) error {
	if r.store.cfg.TestingStaleReads {
		return nil
	}
	if !r.isLeader.Load() {
		return r.notLeader()
	}
	if r.leaseCovers() {
		return nil
	}
	w := &readWaiter{done: make(chan error, 1)}
	r.in.Lock()
	if r.in.closed {
		r.in.Unlock()
		return &RangeNotFoundError{RangeID: r.rangeID}
	}
	r.in.reads = append(r.in.reads, w)
	r.in.Unlock()
	r.store.schedule(r.rangeID)
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-r.store.stopper:
		return ErrStopped
	}
}

// drainInboxLocked hands queued work to Raft. Called by the scheduler.
func (r *Replica) drainInboxLocked(tick bool) {
	r.takeWrittenLocked()
	sp := &r.mu.spare
	r.in.Lock()
	msgs, props, reads := r.in.msgs, r.in.props, r.in.reads
	campaign, transfer := r.in.campaign, r.in.transfer
	// reads is not reused: its batch is kept until its ReadIndex returns.
	r.in.msgs, r.in.props, r.in.reads = sp.msgs, sp.props, nil
	r.in.campaign, r.in.transfer = false, 0
	r.in.Unlock()
	sp.msgs, sp.props = nil, nil
	defer func() { sp.msgs, sp.props = emptiedSlice(msgs), emptiedSlice(props) }()

	raw := r.mu.raw
	for _, m := range msgs {
		switch t := m.GetType(); t {
		case raftpb.MsgSnapStatus:
			// Local reports (from the snapshot sender): RawNode.Step refuses
			// local message types with ErrStepLocalMsg, so they go through
			// the RawNode's report methods.
			status := raft.SnapshotFinish
			if m.GetReject() {
				status = raft.SnapshotFailure
			}
			raw.ReportSnapshot(m.GetFrom(), status)
			continue
		case raftpb.MsgUnreachable:
			// Heartbeats in flight may be lost: forget them, so a later
			// answer is never matched with a more recent send.
			delete(r.mu.heartbeatsSent, m.GetFrom())
			raw.ReportUnreachable(m.GetFrom())
			continue
		case raftpb.MsgHeartbeatResp:
			r.ackHeartbeatLocked(m)
		case raftpb.MsgSnap:
			if r.snapshotSpanTakenLocked(m) {
				continue
			}
		}
		_ = raw.Step(m) // errors mean a stale or irrelevant message
	}
	if tick {
		raw.Tick()
		r.mu.ticks++
		r.judgeLearnerLocked()
	}
	if campaign {
		_ = raw.Campaign()
	}
	if transfer != 0 {
		r.transferLeaderLocked(transfer)
	}
	r.proposeAllLocked(props)
	if len(reads) > 0 {
		if raw.BasicStatus().RaftState != raft.StateLeader {
			for _, w := range reads {
				w.done <- r.notLeader()
			}
		} else {
			r.mu.nextReadID++
			id := r.mu.nextReadID
			r.mu.readBatches[id] = reads
			raw.ReadIndex(binary.BigEndian.AppendUint64(nil, id))
		}
	}
}

// takeWrittenLocked finishes the log writes made durable since the last
// call, in order.
func (r *Replica) takeWrittenLocked() {
	sp := &r.mu.spare
	r.in.Lock()
	written := r.in.written
	r.in.written, sp.written = sp.written, nil
	r.in.Unlock()
	for _, m := range written {
		r.logDurableLocked(m)
	}
	sp.written = emptiedSlice(written)
}

// inboxKeep: a drained inbox slice longer than this (a burst) is let go
// rather than kept as the next one.
const inboxKeep = 1024

// emptiedSlice returns s emptied for reuse, or nil if it was large.
func emptiedSlice[T any](s []T) []T {
	if cap(s) > inboxKeep {
		return nil
	}
	clear(s)
	return s[:0]
}

// transferLeaderLocked hands Raft leadership, and with it the lease, to
// replica to (TransferLease queues it for the next round).
func (r *Replica) transferLeaderLocked(to uint64) {
	// The transferee campaigns at once, ignoring followers' leases, so our
	// lease ends now.
	r.leaseExpiry.Store(0)
	r.mu.raw.TransferLeader(to)
}

// handleReadStatesLocked matches confirmed read indexes with their batches.
func (r *Replica) handleReadStatesLocked(rss []raft.ReadState) {
	for _, rs := range rss {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(rs.RequestCtx)
		batch, ok := r.mu.readBatches[id]
		if !ok {
			continue
		}
		delete(r.mu.readBatches, id)
		r.mu.applyWaiters = append(r.mu.applyWaiters, indexedReads{index: rs.Index, reads: batch})
	}
	r.releaseReadsLocked()
}

func (r *Replica) releaseReadsLocked() {
	applied := r.mu.state.GetAppliedIndex()
	kept := r.mu.applyWaiters[:0]
	for _, w := range r.mu.applyWaiters {
		if w.index <= applied {
			for _, rw := range w.reads {
				rw.done <- nil
			}
		} else {
			kept = append(kept, w)
		}
	}
	r.mu.applyWaiters = kept
}

// failPendingLocked fails everything waiting on leadership.
// closeInbox fails the work queued for the scheduler (the replica is being
// destroyed): none of it was proposed, so it can be retried elsewhere.
func (r *Replica) closeInbox() {
	r.in.Lock()
	props, reads := r.in.props, r.in.reads
	r.in.props, r.in.reads, r.in.written, r.in.closed = nil, nil, nil, true
	r.in.Unlock()
	gone := &RangeNotFoundError{RangeID: r.rangeID}
	for _, p := range props {
		p.finish(applyResult{err: gone})
	}
	for _, w := range reads {
		w.done <- gone
	}
}

func (r *Replica) failPendingLocked(propErr, readErr error) {
	for id, p := range r.mu.proposals {
		p.finish(applyResult{err: propErr})
		delete(r.mu.proposals, id)
	}
	for id, b := range r.mu.readBatches {
		for _, w := range b {
			w.done <- readErr
		}
		delete(r.mu.readBatches, id)
	}
	for _, w := range r.mu.applyWaiters {
		for _, rw := range w.reads {
			rw.done <- readErr
		}
	}
	r.mu.applyWaiters = nil
}

// updateLeadershipLocked publishes leadership after a Ready's SoftState.
func (r *Replica) updateLeadershipLocked(ss *raft.SoftState) {
	if ss == nil {
		return
	}
	wasLeader := r.isLeader.Load()
	nowLeader := ss.RaftState == raft.StateLeader
	r.leaderNode.Store(r.mu.peerNodes[ss.Lead])
	switch {
	case !nowLeader:
		r.leaderTerm.Store(0)
	case !wasLeader:
		r.leaderTerm.Store(r.mu.raw.BasicStatus().GetTerm())
	}
	if nowLeader && !wasLeader {
		// Before any write of the term is stamped.
		r.order.leaseStart(r.leaseLowWater())
	}
	r.isLeader.Store(nowLeader)
	if wasLeader && !nowLeader {
		r.failPendingLocked(ErrAmbiguous, r.notLeader())
	}
	if nowLeader && !wasLeader {
		r.mu.heartbeatsSent = map[uint64][]monoTime{}
		r.mu.lastContact = map[uint64]monoTime{}
		r.mu.peerLost = map[uint64]bool{}
		r.store.notifyLeader(r)
	}
	r.mu.lastLeader = ss.Lead
}

// Status is a point-in-time view of a replica for operators.
type Status struct {
	RangeID   uint64
	ReplicaID uint64
	Desc      *tidekvpb.RangeDescriptor
	Leader    bool
	Term      uint64
	Commit    uint64
	Applied   uint64
}

// Status returns the replica's current status.
func (r *Replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{RangeID: r.rangeID, ReplicaID: r.mu.replicaID, Desc: r.desc.Load(), Leader: r.isLeader.Load(), Applied: r.mu.state.GetAppliedIndex()}
	if r.mu.raw != nil {
		bs := r.mu.raw.BasicStatus()
		s.Term, s.Commit = bs.GetTerm(), bs.GetCommit()
	}
	return s
}
