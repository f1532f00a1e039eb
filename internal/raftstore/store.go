package raftstore

import (
	"bytes"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// Listener hears about replica events the node reacts to (reporting
// descriptors to the meta range). Calls come from the scheduler goroutine
// and must not block.
type Listener interface {
	// LeaderAcquired: this node became leader of the range.
	LeaderAcquired(desc *tidekvpb.RangeDescriptor)
	// DescriptorChanged: a leader replica applied a new descriptor.
	DescriptorChanged(desc *tidekvpb.RangeDescriptor)
	// ReplicaRemoved: the replica GC destroyed a stale local replica.
	ReplicaRemoved(rm Removed)
}

// Store is the set of replicas on one node plus the scheduler that drives
// them.
type Store struct {
	cfg       Config
	nodeID    uint64
	eng       storage.Engine
	transport Transport
	listener  Listener
	clock     *SteadyClock
	// hlc is the node's hybrid logical clock over clock (one per node).
	hlc *hlc.Clock
	// clockUntrusted, when set, holds why the offset monitor does not
	// trust this node's clock; its replicas then hold no leases.
	clockUntrusted atomic.Pointer[string]
	directory      atomic.Pointer[directoryRef]

	mu struct {
		sync.RWMutex
		replicas map[uint64]*Replica
	}
	// index is an immutable, sorted view of initialized user replicas for
	// key lookups on the request path.
	index atomic.Pointer[[]*Replica]

	sched struct {
		sync.Mutex
		pending map[uint64]struct{}
		spare   map[uint64]struct{} // the next pending (takeScheduled)
	}
	wake    chan struct{}
	stopper chan struct{}
	done    chan struct{}
	// rounds counts the scheduler's rounds started (run).
	rounds atomic.Uint64
	// early holds a leader's appends for a range this node has no
	// initialized replica of, each with rounds as it arrived, until a round
	// started after it has run (deliverEarly).
	early struct {
		sync.Mutex
		msgs []earlyMsg
	}

	// admin serializes replica changes per range.
	admin struct {
		sync.Mutex
		locks map[uint64]*sync.Mutex
	}

	proposalSeq atomic.Uint64
	// logVersion is the log version the store proposes at (logversion.go);
	// versionMu serializes raising it.
	logVersion atomic.Uint32
	versionMu  sync.Mutex
	stats      Stats
	// logw makes the replicas' Raft log writes durable (logwriter.go).
	logw *logWriter
	// round is the scheduler's (run) apply state, kept across rounds so
	// that its batch's maps and its slices are reused.
	round     roundApply
	roundBufs roundBufs
	snapSem   chan struct{}
	// snapLimiter meters outgoing snapshot bytes (nil: unlimited).
	snapLimiter *tokenBucket
	stopOnce    sync.Once
	started     atomic.Bool
	// testingTicksHeld, set only by tests (testCluster.holdTicks), stops
	// the Raft clock of every replica of this store: no election,
	// heartbeat or transfer timer advances, while messages, proposals and
	// campaigns still run. A test reaches a state no timer may disturb.
	testingTicksHeld atomic.Bool
	// testingTicksLent, while ticks are held, is how many more ticks the
	// scheduler may deliver (testCluster.stepTick): a test advances the
	// Raft clock one tick at a time.
	testingTicksLent atomic.Int64
}

// NewStore opens the replicas persisted in eng. Call Start to run them.
func NewStore(cfg Config, nodeID uint64, eng storage.Engine, t Transport, l Listener) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.SnapshotDir, 0o755); err != nil {
		return nil, err
	}
	s := &Store{
		cfg: cfg, nodeID: nodeID, eng: eng, transport: t, listener: l,
		wake: make(chan struct{}, 1), stopper: make(chan struct{}), done: make(chan struct{}),
		snapSem: make(chan struct{}, cfg.MaxConcurrentSnapshotSends),
	}
	s.clock = NewSteadyClock(cfg.Clock)
	var err error
	if s.hlc, err = hlc.NewClock(s.clock, cfg.MaxClockOffset); err != nil {
		return nil, err
	}
	if cfg.SnapshotBytesPerSecond > 0 {
		s.snapLimiter = newTokenBucket(cfg.SnapshotBytesPerSecond, snapshotBurst, time.Now)
	}
	s.logw = newLogWriter(eng, &s.stats, s.stopper)
	if h := cfg.testingLogWrite; h != nil {
		s.logw.testingHook = func(st logWriteStage, ws []logWrite) { h(nodeID, st, ws) }
	}
	s.mu.replicas = map[uint64]*Replica{}
	s.sched.pending, s.sched.spare = map[uint64]struct{}{}, map[uint64]struct{}{}
	s.proposalSeq.Store(rand.Uint64() >> 16)
	if err := s.loadLogVersion(); err != nil {
		return nil, err
	}
	if err := s.loadReplicas(); err != nil {
		return nil, err
	}
	return s, nil
}

// NodeID returns the node this store belongs to.
func (s *Store) NodeID() uint64 { return s.nodeID }

func (s *Store) loadReplicas() error {
	lo, hi := keys.ReplicaStateSpan()
	it, err := s.eng.NewIter(lo, hi)
	if err != nil {
		return err
	}
	var ids []uint64
	for ok := it.First(); ok; ok = it.Next() {
		if keys.IsReplicaStateKey(it.Key()) {
			id, _ := keys.RangeIDFromLocalKey(it.Key())
			ids = append(ids, id)
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	var removed []*tidekvpb.ReplicaState
	for _, id := range ids {
		st, err := loadReplicaState(s.eng, id)
		if err != nil {
			return err
		}
		if replicaOnNode(st.GetDesc(), s.nodeID) == nil {
			// The node applied its own removal and stopped before
			// destroying the replica: finish the job.
			removed = append(removed, st)
			continue
		}
		r, err := s.addInitializedReplica(st)
		if err != nil {
			return fmt.Errorf("load range %d: %w", id, err)
		}
		if err := s.markLostAtStart(r, st); err != nil {
			return fmt.Errorf("load range %d: %w", id, err)
		}
	}
	s.rebuildIndex()
	// A crash may have come between a merge (or a snapshot holding one)
	// and the destruction of the frozen replica it took over: finish it.
	for _, r := range s.Replicas() {
		if l := s.GetReplica(r.desc.Load().GetMergingInto()); l != nil {
			s.dropMergedInto(l.desc.Load())
		}
	}
	for _, st := range removed {
		r := s.newReplica(st.GetDesc().GetRangeId())
		r.mu.Lock()
		r.mu.state = st
		r.desc.Store(st.GetDesc())
		r.mu.replicaID = st.GetDesc().GetNextReplicaId() - 1
		s.destroyReplicaLocked(r, "removed from the range before the node stopped")
		r.mu.Unlock()
	}
	return nil
}

func (s *Store) newReplica(rangeID uint64) *Replica {
	r := &Replica{store: s, rangeID: rangeID}
	r.layout.Store(&layoutView{})
	r.order = newReadOrder()
	r.order.skipCache = s.cfg.TestingBreaks.SkipTSCache
	r.gcThreshold.Store(&hlc.Timestamp{})
	r.mu.proposals = map[uint64]*proposal{}
	r.mu.readBatches = map[uint64][]*readWaiter{}
	r.mu.peerNodes = map[uint64]uint64{}
	r.mu.peerLost = map[uint64]bool{}
	r.mu.outgoingSnaps = map[uint64]storage.Snapshot{}
	r.mu.incomingSST = map[uint64]stagedSST{}
	r.mu.lastContact = map[uint64]monoTime{}
	r.mu.heartbeatsSent = map[uint64][]monoTime{}
	return r
}

// addInitializedReplica creates a replica from its persisted state.
func (s *Store) addInitializedReplica(st *tidekvpb.ReplicaState) (*Replica, error) {
	desc := st.GetDesc()
	var replicaID uint64
	for _, rd := range desc.GetReplicas() {
		if rd.GetNodeId() == s.nodeID {
			replicaID = rd.GetReplicaId()
		}
	}
	if replicaID == 0 {
		return nil, fmt.Errorf("range %d: node %d not in descriptor", desc.GetRangeId(), s.nodeID)
	}
	ms, err := loadRaftState(s.eng, desc.GetRangeId(), st)
	if err != nil {
		return nil, err
	}
	r := s.newReplica(desc.GetRangeId())
	r.mu.Lock()
	err = r.initRaftLocked(replicaID, ms, st)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.mu.replicas[r.rangeID] = r
	s.mu.Unlock()
	return r, nil
}

// Bootstrap writes the initial state of a new cluster's ranges on its first
// node: each descriptor must list only this node. The cluster starts at log
// version (the version the meta range records, BootstrapMeta): the store
// proposes at it from the start, and at LogVersionMVCC or later the user
// ranges begin on the versioned layout, so a new cluster has nothing to
// migrate (migrate.go is for clusters that began older).
func (s *Store) Bootstrap(descs []*tidekvpb.RangeDescriptor, version uint32) error {
	if err := s.RaiseLogVersion(version); err != nil {
		return err
	}
	b := s.eng.NewBatch()
	defer b.Close()
	for _, d := range descs {
		layout := tidekvpb.DataLayout_DATA_LAYOUT_UNVERSIONED
		// The meta range keeps its unversioned layout.
		if version >= LogVersionMVCC && d.GetRangeId() != keys.MetaRangeID {
			layout = tidekvpb.DataLayout_DATA_LAYOUT_MVCC
		}
		if _, err := writeInitialRangeState(s.eng, b, d, layout, nil); err != nil {
			return err
		}
	}
	if err := b.Commit(true); err != nil {
		return err
	}
	for _, d := range descs {
		st, err := loadReplicaState(s.eng, d.GetRangeId())
		if err != nil {
			return err
		}
		r, err := s.addInitializedReplica(st)
		if err != nil {
			return err
		}
		r.in.campaign = true
		s.schedule(r.rangeID)
	}
	s.rebuildIndex()
	return nil
}

// Start runs the scheduler.
func (s *Store) Start() {
	s.started.Store(true)
	go s.logw.run()
	go s.run()
	s.mu.RLock()
	for id := range s.mu.replicas {
		s.schedule(id)
	}
	s.mu.RUnlock()
}

// Stop halts the scheduler; pending requests fail.
func (s *Store) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopper)
		if s.started.Load() {
			<-s.done
			s.logw.stop()
		}
	})
}

// GetReplica returns the local replica of a range, or nil.
func (s *Store) GetReplica(rangeID uint64) *Replica {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.replicas[rangeID]
}

// Replicas returns all local replicas, ordered by range ID.
func (s *Store) Replicas() []*Replica {
	s.mu.RLock()
	out := make([]*Replica, 0, len(s.mu.replicas))
	for _, r := range s.mu.replicas {
		out = append(out, r)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rangeID < out[j].rangeID })
	return out
}

// LookupKey returns the initialized local user replica whose span covers key.
func (s *Store) LookupKey(key []byte) *Replica {
	idx := s.index.Load()
	if idx == nil {
		return nil
	}
	rs := *idx
	i := sort.Search(len(rs), func(i int) bool {
		return bytes.Compare(rs[i].desc.Load().GetStartKey(), key) > 0
	}) - 1
	if i < 0 {
		return nil
	}
	r := rs[i]
	d := r.desc.Load()
	if !keys.Contains(d.GetStartKey(), d.GetEndKey(), key) {
		return nil
	}
	return r
}

func (s *Store) rebuildIndex() {
	s.mu.RLock()
	var rs []*Replica
	for _, r := range s.mu.replicas {
		if d := r.desc.Load(); d != nil && r.rangeID != keys.MetaRangeID {
			rs = append(rs, r)
		}
	}
	s.mu.RUnlock()
	sort.Slice(rs, func(i, j int) bool {
		return bytes.Compare(rs[i].desc.Load().GetStartKey(), rs[j].desc.Load().GetStartKey()) < 0
	})
	s.index.Store(&rs)
}

func (s *Store) adminMu(rangeID uint64) *sync.Mutex {
	s.admin.Lock()
	defer s.admin.Unlock()
	if s.admin.locks == nil {
		s.admin.locks = map[uint64]*sync.Mutex{}
	}
	m := s.admin.locks[rangeID]
	if m == nil {
		m = &sync.Mutex{}
		s.admin.locks[rangeID] = m
	}
	return m
}

func (s *Store) nextProposalID() uint64 { return s.proposalSeq.Add(1) }

func (s *Store) schedule(rangeID uint64) {
	s.sched.Lock()
	s.sched.pending[rangeID] = struct{}{}
	s.sched.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Store) notifyLeader(r *Replica) {
	if s.listener != nil && r.desc.Load() != nil {
		s.listener.LeaderAcquired(r.desc.Load())
	}
}

// HandleRaftMessage delivers a message from another node.
func (s *Store) HandleRaftMessage(m *tidekvpb.RaftMessage) { s.handleRaftMessage(m, true) }

// earlyMsg is a message held back by handleRaftMessage.
type earlyMsg struct {
	m     *tidekvpb.RaftMessage
	after uint64 // rounds started when it arrived
}

// handleRaftMessage delivers m, holding it back (hold) for one round if it
// is a leader's append for a range with no initialized replica here. Such
// a replica answers an append with a rejection from its empty log, which
// makes the leader send a snapshot. But the range may be the right half of
// a split this node is about to apply: the leader of the left half sent
// this node the split's commit before the new range's leader existed (the
// same node, whose messages arrive in order), so a round started after
// this append steps that commit and applies the split, which creates the
// replica from the node's own data at the log position the leader expects,
// and no snapshot is needed. A replica added by a replica change waits one
// round more for its snapshot.
func (s *Store) handleRaftMessage(m *tidekvpb.RaftMessage, hold bool) {
	msg := m.GetMessage()
	if msg == nil || raft.IsLocalMsg(msg.GetType()) {
		// Local types (snapshot status, unreachable) come only from this
		// node's own components; the inbox acts on them.
		return
	}
	if s.misaddressed(m) != nil {
		return
	}
	r := s.GetReplica(m.GetRangeId())
	if r != nil && s.dropOlderIncarnation(r, msg.GetTo()) {
		r = nil
	}
	if hold && msg.GetType() == raftpb.MsgApp && (r == nil || r.desc.Load() == nil) {
		s.early.Lock()
		s.early.msgs = append(s.early.msgs, earlyMsg{m: m, after: s.rounds.Load()})
		s.early.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
		return
	}
	if t := m.GetLeaseHandoff().HLC(); r != nil && !t.IsZero() {
		// Before the campaign the message starts: the lease this node
		// is about to take stamps writes above every read served under
		// the old one.
		r.order.leaseStart(t)
	}
	if r == nil {
		// A leader's traffic means we were added to the range and need a
		// snapshot. A vote request means a split created the range and its
		// first candidate reached us before we applied the split: voting
		// with an empty log is safe (any candidate's log is at least as
		// up to date), and the vote is kept when the split creates the
		// replica, so the new range elects a leader at once.
		switch msg.GetType() {
		case raftpb.MsgApp, raftpb.MsgHeartbeat, raftpb.MsgSnap, raftpb.MsgVote, raftpb.MsgPreVote:
		default:
			return
		}
		var err error
		if r, err = s.createUninitialized(m.GetRangeId(), msg.GetTo()); err != nil || r == nil {
			return
		}
	}
	r.mu.Lock()
	if r.mu.destroyed {
		r.mu.Unlock()
		if next := s.GetReplica(m.GetRangeId()); next != nil && next != r {
			// Replaced while the message was on its way (a split's
			// replica taking a placeholder's place): the message is the
			// new replica's.
			s.HandleRaftMessage(m)
		}
		return
	}
	if r.mu.replicaID != msg.GetTo() {
		// Addressed to an older or newer incarnation; the replica GC or the
		// next snapshot sorts it out.
		r.mu.Unlock()
		return
	}
	// A MsgTransferLeader a follower forwarded names the transferee as
	// From, not the sender.
	if msg.GetType() != raftpb.MsgTransferLeader {
		r.learnPeerLocked(msg.GetFrom(), m.GetFromNodeId())
		r.notePeerLostLocked(msg.GetFrom(), m.GetDataLost())
	}
	r.mu.leaderHeld = max(r.mu.leaderHeld, m.GetLogHeldByAll())
	// Queued before the lock is released: a replica taking this one's
	// place takes what is queued here (installSplitReplica).
	r.enqueueMsg(msg)
	r.mu.Unlock()
}

// misaddressed refuses a message sent to another node ID (0: the sender
// did not say). Node IDs are never reused, but addresses are: a node
// started on a wiped disk at a replaced node's address gets a new ID, and
// the old one's peers still send its replicas' traffic there. Taken up, it
// would make a replica of no data answer for one whose votes and log it
// never had.
func (s *Store) misaddressed(m *tidekvpb.RaftMessage) error {
	if to := m.GetToNodeId(); to != 0 && to != s.nodeID {
		s.stats.MessagesMisaddressed.Add(1)
		return fmt.Errorf("raft message for node %d reached node %d (a node that once had this address)", to, s.nodeID)
	}
	return nil
}

// dropOlderIncarnation destroys r if a message from its range addresses a
// newer replica (replicaID) on this node and r holds nothing to keep:
//   - r is uninitialized (no data, no log): this node was added, removed
//     before its snapshot arrived (a rolled-back addition), and added again;
//   - r is lost (its data went with a restart, volatile.go): its range's
//     leader removed it and added a fresh replica here, and r missed its
//     own removal (the leader stops sending to a replica once it is
//     removed). Its votes no longer count: the removal is committed, or the
//     range would not have added the new one. Left alone it would wait for
//     the replica GC, and where there is no range directory, for ever.
//
// An initialized replica with data is left to the replica GC (gc.go). It
// reports whether it destroyed r; the caller then creates the new
// incarnation.
func (s *Store) dropOlderIncarnation(r *Replica, replicaID uint64) bool {
	initialized := r.desc.Load() != nil
	if initialized && !r.lost.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.destroyed || r.mu.replicaID >= replicaID || !initialized && r.desc.Load() != nil {
		return false
	}
	what := "uninitialized"
	if initialized {
		what = "lost"
	}
	s.destroyReplicaLocked(r, fmt.Sprintf("%s replica %d replaced by replica %d", what, r.mu.replicaID, replicaID))
	return true
}

func (s *Store) createUninitialized(rangeID, replicaID uint64) (*Replica, error) {
	next, err := loadTombstone(s.eng, rangeID)
	if err != nil || replicaID < next {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.mu.replicas[rangeID]; r != nil {
		return r, nil
	}
	r := s.newReplica(rangeID)
	ms := raft.NewMemoryStorage()
	if hs, err := loadHardState(s.eng, rangeID); err != nil {
		return nil, err
	} else if hs != nil {
		// Keep the term and vote (never vote twice in a term) but not the
		// commit index: an uninitialized replica has no log to commit.
		_ = ms.SetHardState(&raftpb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote())})
	}
	r.mu.Lock()
	err = r.initRaftLocked(replicaID, ms, &tidekvpb.ReplicaState{})
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.mu.replicas[rangeID] = r
	return r, nil
}

// destroyReplicaLocked removes a replica and its data from this node and
// leaves a tombstone so stale messages cannot resurrect it. r.mu is held.
func (s *Store) destroyReplicaLocked(r *Replica, reason string) {
	if r.mu.destroyed {
		return
	}
	r.mu.destroyed = true
	log.Printf("range %d: removing replica %d from node %d: %s", r.rangeID, r.mu.replicaID, s.nodeID, reason)
	// Before the data is cleared: no read may pass its checks after this,
	// and one that passed them earlier is refused once it has read.
	r.leaseExpiry.Store(0)
	r.isLeader.Store(false)
	r.publishGoneLocked()
	// No log write of r's may land after its state is cleared: none is
	// queued from now on (it is destroyed), and those queued finish first.
	s.logw.flush()
	b := s.eng.NewBatch()
	defer b.Close()
	lo, hi := keys.RangeLocalSpan(r.rangeID)
	_ = b.DeleteRange(lo, hi)
	if d := r.desc.Load(); d != nil && !s.spanOwnedByOther(r.rangeID, d) {
		_ = clearRangeData(b, d)
	}
	_ = putProto(b, keys.TombstoneKey(r.rangeID), &tidekvpb.Tombstone{NextReplicaId: r.mu.replicaID + 1})
	if err := b.Commit(true); err != nil {
		log.Printf("range %d: destroy: %v", r.rangeID, err)
	}
	for _, sn := range r.mu.outgoingSnaps {
		sn.Close()
	}
	for _, st := range r.mu.incomingSST {
		os.Remove(st.path)
	}
	// A proposal pending here may still be committed by the other
	// replicas: ambiguous. "Not found" would send it to the range's new
	// home to run again (destroy_test.go).
	gone := &RangeNotFoundError{RangeID: r.rangeID}
	r.failPendingLocked(fmt.Errorf("%w: range %d went from this node with the write pending", ErrAmbiguous, r.rangeID), gone)
	r.closeInbox()
	s.mu.Lock()
	if s.mu.replicas[r.rangeID] == r {
		delete(s.mu.replicas, r.rangeID)
	}
	s.mu.Unlock()
	s.rebuildIndex()
}

// spanOwnedByOther reports whether another initialized local replica overlaps d.
func (s *Store) spanOwnedByOther(rangeID uint64, d *tidekvpb.RangeDescriptor) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id, o := range s.mu.replicas {
		od := o.desc.Load()
		if id == rangeID || od == nil || (id == keys.MetaRangeID) != (rangeID == keys.MetaRangeID) {
			continue
		}
		if keys.Overlaps(od.GetStartKey(), od.GetEndKey(), d.GetStartKey(), d.GetEndKey()) {
			return true
		}
	}
	return false
}

// ReportUnreachable tells a replica's Raft that a message to a peer was lost.
func (s *Store) ReportUnreachable(rangeID, toReplica uint64) {
	r := s.GetReplica(rangeID)
	if r == nil {
		return
	}
	r.enqueueMsg(&raftpb.Message{Type: raftpb.MsgUnreachable.Enum(), From: new(toReplica)})
}
