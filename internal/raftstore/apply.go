package raftstore

import (
	"bytes"
	"fmt"
	"log"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// applyBatch accumulates the effects of applying entries. Commands that read
// (CAS, delete results, meta updates) must see earlier entries of the same
// round, so writes are mirrored in an overlay consulted before the engine.
type applyBatch struct {
	eng     storage.Engine
	b       storage.Batch // &sized
	sized   sizedBatch
	enc     encoder           // the replicas' state records
	overlay map[string][]byte // nil value: deleted
	// versions holds the newest version written in the batch of each
	// keys.VersionedKey; migrated, the timestamp of each range migrated
	// in it (applydata.go).
	versions map[string]mvcc.Version
	migrated map[uint64]hlc.Timestamp
	// sync makes the commit durable (a merge freeze must survive a crash).
	sync bool
	// setBytes counts the key and value bytes of every Set into the
	// batch, across flushes: what a command stored (WrittenBytes).
	setBytes uint64
	// stored is what each replica's commands Set into the batch, added to
	// its WrittenBytes once the batch is committed (settle): counted
	// before, a size counted from the engine in between would miss bytes
	// the counter already holds, and the estimate read low.
	stored map[*Replica]uint64
	// vk is versionedData.write's version key, reused.
	vk []byte
	// data is the range data dataLocked returned last, reused.
	data versionedData
	// answers are the proposers to wake with their commands' results
	// once the batch is committed (answer), across flushes.
	answers []answer
}

// answer is a proposer and the result of its command.
type answer struct {
	p   *proposal
	res applyResult
}

// sizedBatch counts the bytes Set into it.
type sizedBatch struct {
	storage.Batch
	set *uint64
}

func (b sizedBatch) Set(key, value []byte) error {
	*b.set += uint64(len(key) + len(value))
	return b.Batch.Set(key, value)
}

func newApplyBatch(eng storage.Engine) *applyBatch {
	ab := &applyBatch{eng: eng, stored: map[*Replica]uint64{}}
	ab.reset()
	return ab
}

// reset starts an empty batch.
func (ab *applyBatch) reset() {
	ab.sized = sizedBatch{Batch: ab.eng.NewBatch(), set: &ab.setBytes}
	ab.b = &ab.sized
	ab.overlay = emptied(ab.overlay)
	ab.versions = emptied(ab.versions)
	ab.migrated = emptied(ab.migrated)
}

// reuse makes a committed batch a new one, as newApplyBatch would.
func (ab *applyBatch) reuse() {
	ab.sync = false
	ab.reset()
}

// reusedMapMax: a map that held more entries than this is dropped rather
// than cleared, so that one large apply (a split, a snapshot's clear) does
// not make every later round clear its table.
const reusedMapMax = 256

// emptied returns m emptied, or a new map if m is nil or was large.
func emptied[K comparable, V any](m map[K]V) map[K]V {
	if m == nil || len(m) > reusedMapMax {
		return map[K]V{}
	}
	clear(m)
	return m
}

func (ab *applyBatch) get(key []byte) ([]byte, bool, error) {
	if v, ok := ab.overlay[string(key)]; ok {
		return v, v != nil, nil
	}
	return ab.eng.Get(key)
}

// mustGet reads key as the batch sees it; a read error is fatal, as for
// any apply step.
func (ab *applyBatch) mustGet(r *Replica, key []byte) ([]byte, bool) {
	v, found, err := ab.get(key)
	if err != nil {
		log.Fatalf("range %d: read during apply: %v", r.rangeID, err)
	}
	return v, found
}

// clearSpan deletes every key in [start, end) as the batch sees it: those in
// the engine and those written earlier in this batch.
func (ab *applyBatch) clearSpan(r *Replica, start, end []byte) {
	if err := ab.eachKey(start, end, func(k, _ []byte) error { return ab.del(k) }); err != nil {
		log.Fatalf("range %d: clear during apply: %v", r.rangeID, err)
	}
}

// eachKey calls fn with every key in [start, end) as the batch sees it and
// its value, valid during the call: the engine's keys the batch has not
// written, then those it has. fn may write to the batch.
func (ab *applyBatch) eachKey(start, end []byte, fn func(k, v []byte) error) error {
	it, err := ab.eng.NewIter(start, end)
	if err != nil {
		return err
	}
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		if _, written := ab.overlay[string(it.Key())]; !written {
			err = fn(it.Key(), it.Value())
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	var ks []string
	for k, v := range ab.overlay {
		if v != nil && k >= string(start) && k < string(end) {
			ks = append(ks, k)
		}
	}
	for _, k := range ks {
		if err == nil {
			err = fn([]byte(k), ab.overlay[k])
		}
	}
	return err
}

func (ab *applyBatch) set(key, val []byte) error {
	if val == nil {
		val = []byte{}
	}
	ab.overlay[string(key)] = val
	return ab.b.Set(key, val)
}

func (ab *applyBatch) del(key []byte) error {
	ab.overlay[string(key)] = nil
	return ab.b.Delete(key)
}

// commit writes the batch without fsync: the Raft log is the durable record
// and entries after the persisted applied index are replayed on restart.
func (ab *applyBatch) commit() error {
	defer ab.b.Close()
	if ab.b.Empty() {
		return nil
	}
	return ab.b.Commit(ab.sync)
}

// settle adds what the committed batch stored to its replicas'
// WrittenBytes.
func (ab *applyBatch) settle() {
	for r, n := range ab.stored {
		r.written.Add(n)
	}
	clear(ab.stored)
}

// answer wakes the proposers of the commands the committed batch applied.
func (ab *applyBatch) answer() {
	for _, a := range ab.answers {
		a.p.finish(a.res)
	}
	clear(ab.answers)
	ab.answers = ab.answers[:0]
}

// flush commits what is pending so iterators see it, and starts afresh.
func (ab *applyBatch) flush() error {
	if err := ab.commit(); err != nil {
		return err
	}
	ab.reset()
	return nil
}

// applyCommittedLocked applies entries, leaves in ab the proposers to
// answer once it is written (safe at any point after), and returns the
// steps that create or destroy replicas (only once no replica is locked).
func (r *Replica) applyCommittedLocked(ab *applyBatch, ents []*raftpb.Entry) (post []func()) {
	if len(ents) == 0 {
		return nil
	}
	for _, e := range ents {
		if e.GetIndex() <= r.mu.state.GetAppliedIndex() {
			continue
		}
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.GetData()) == 0 {
				break // a new leader's empty entry
			}
			cmd, err := decodeCommand(e.GetData())
			if err != nil {
				log.Fatalf("range %d: corrupt entry %d: %v", r.rangeID, e.GetIndex(), err)
			}
			for _, cmd := range entryCommands(cmd) {
				res, after := r.applyCommandLocked(ab, cmd, e.GetIndex())
				post = append(post, after...)
				if p := r.mu.proposals[cmd.GetProposalId()]; p != nil && cmd.GetProposalId() != 0 {
					delete(r.mu.proposals, p.id)
					ab.answers = append(ab.answers, answer{p: p, res: res})
				}
			}
		case raftpb.EntryConfChangeV2:
			post = append(post, r.applyConfChangeLocked(e)...)
		}
		r.mu.state.AppliedIndex = e.GetIndex()
		if f := r.store.cfg.testingApplied; f != nil {
			f(r.store.nodeID, r.rangeID, e.GetIndex())
		}
		if r.mu.removalPending {
			break
		}
	}
	r.saveVersionBoundLocked()
	ab.enc.key = keys.AppendReplicaStateKey(ab.enc.key[:0], r.rangeID)
	if err := ab.enc.put(ab.b, ab.enc.key, r.mu.state); err != nil {
		log.Fatalf("range %d: %v", r.rangeID, err)
	}
	return post
}

func (r *Replica) checkKeysLocked(ks ...[]byte) error {
	d := r.mu.state.GetDesc()
	for _, k := range ks {
		if !keys.Contains(d.GetStartKey(), d.GetEndKey(), k) {
			return &KeyMismatchError{Key: k, Desc: d}
		}
	}
	return nil
}

func (r *Replica) applyCommandLocked(ab *applyBatch, cmd *tidekvpb.RaftCommand, index uint64) (applyResult, []func()) {
	switch {
	case cmd.GetFreezeInto() != 0:
		return r.applyFreezeLocked(ab, cmd.GetFreezeInto())
	case cmd.GetUnfreeze():
		return r.applyUnfreezeLocked()
	case cmd.GetMerge() != nil:
		return r.applyMergeLocked(cmd.GetMerge())
	case cmd.GetMeta() == nil && r.frozenErrLocked() != nil:
		// Writes, CAS and splits of a frozen range do nothing.
		return applyResult{err: r.frozenErrLocked()}, nil
	case cmd.GetSplit() != nil:
		return r.applySplitLocked(ab, cmd.GetSplit())
	case cmd.GetMeta() != nil:
		res, err := r.applyMetaLocked(ab, cmd.GetMeta())
		if err != nil {
			log.Fatalf("range %d: meta apply at %d: %v", r.rangeID, index, err)
		}
		return res, nil
	case cmd.GetGc() != nil:
		return r.applyGCLocked(ab, cmd.GetGc()), nil
	case cmd.GetResetLost() != nil:
		return r.applyResetLostLocked(ab)
	default:
		return r.applyStoringLocked(ab, cmd)
	}
}

// applyStoringLocked applies a command that stores user data (writes, a
// CAS, a transaction step, a layout migration) and counts the bytes it
// Set (WrittenBytes, once the batch is committed): every version,
// tombstone, intent and record, as the engine stores them (plus the
// replica state a transaction step writes).
func (r *Replica) applyStoringLocked(ab *applyBatch, cmd *tidekvpb.RaftCommand) (applyResult, []func()) {
	before := ab.setBytes
	defer func() { ab.stored[r] += ab.setBytes - before }()
	switch {
	case cmd.GetMigrateLayout() != nil:
		return r.applyMigrateLocked(ab, cmd)
	case cmd.GetTxn() != nil:
		return r.applyTxnLocked(ab, cmd), nil
	case cmd.GetCas() != nil:
		return r.applyCASLocked(ab, cmd), nil
	default:
		return r.applyWritesLocked(ab, cmd), nil
	}
}

func (r *Replica) applyWritesLocked(ab *applyBatch, cmd *tidekvpb.RaftCommand) applyResult {
	ops, g := cmd.GetWrites(), cmd.GetWriteGuard()
	for _, op := range ops {
		if err := r.checkKeysLocked(op.GetKey()); err != nil {
			return applyResult{err: err}
		}
	}
	data, err := r.dataLocked(ab, cmd)
	if err != nil {
		return applyResult{err: err}
	}
	if r.mu.state.GetMayHoldIntents() {
		ks := make([][]byte, 0, len(ops)+1)
		for _, op := range ops {
			ks = append(ks, op.GetKey())
		}
		if g != nil {
			ks = append(ks, g.GetKey())
		}
		if err := r.checkIntentsLocked(data, ks...); err != nil {
			return applyResult{err: err}
		}
	}
	var res applyResult
	if g != nil || cmd.GetWantExisted() {
		res.write = &tidekvpb.WriteResponse{}
	}
	// Whether a deleted key or an op's key existed changes only the answer,
	// not the state, so only the replica whose proposer waits reads it: on
	// the others it would be a point read per op for nothing (a Redis HSET
	// of ten fields read ten keys on every replica).
	answered := cmd.GetProposalId() != 0 && r.mu.proposals[cmd.GetProposalId()] != nil
	if g != nil {
		if err := r.checkGuardLocked(g); err != nil {
			return applyResult{err: err}
		}
		cur, found := data.get(g.GetKey())
		res.write.GuardExisted, res.write.GuardCurrent = found, cur
		if found && !bytes.Equal(cur, g.GetValue()) {
			res.write.GuardFailed = true
			return res
		}
		if !found && len(g.GetClearStart()) > 0 {
			if err := data.clear(g.GetClearStart(), g.GetClearEnd()); err != nil {
				return applyResult{err: err}
			}
		}
	}
	for _, op := range ops {
		if answered && (op.GetDelete() || cmd.GetWantExisted()) {
			_, found := data.get(op.GetKey())
			if op.GetDelete() {
				res.deleted = res.deleted || found
			}
			if cmd.GetWantExisted() {
				res.write.Existed = append(res.write.Existed, found)
			}
		}
		switch {
		case op.GetDelete():
			data.del(op.GetKey())
		case op.GetExpire():
			data.expire(op.GetKey(), op.GetExpiresAt())
		default:
			data.put(op.GetKey(), op.GetValue(), ttl{expiresAt: op.GetExpiresAt(), keep: op.GetKeepTtl()})
		}
	}
	return res
}

// checkGuardLocked checks that a guard's key and clear span lie in the
// range (the span's exclusive end may be the range's end).
func (r *Replica) checkGuardLocked(g *tidekvpb.LogGuard) error {
	if err := r.checkKeysLocked(g.GetKey()); err != nil {
		return err
	}
	if len(g.GetClearStart()) == 0 {
		return nil
	}
	d := r.mu.state.GetDesc()
	if err := r.checkKeysLocked(g.GetClearStart()); err != nil {
		return err
	}
	if len(d.GetEndKey()) > 0 && bytes.Compare(g.GetClearEnd(), d.GetEndKey()) > 0 {
		return &KeyMismatchError{Key: g.GetClearEnd(), Desc: d}
	}
	return nil
}

func (r *Replica) applyCASLocked(ab *applyBatch, cmd *tidekvpb.RaftCommand) applyResult {
	c := cmd.GetCas()
	if err := r.checkKeysLocked(c.GetKey()); err != nil {
		return applyResult{err: err}
	}
	data, err := r.dataLocked(ab, cmd)
	if err != nil {
		return applyResult{err: err}
	}
	if err := r.checkIntentsLocked(data, c.GetKey()); err != nil {
		return applyResult{err: err}
	}
	cur, found := data.get(c.GetKey())
	resp := &tidekvpb.CompareAndSetResponse{CurrentExists: found, CurrentValue: cur}
	nv := c.GetNewValue()
	if c.GetIncrement() {
		nv, resp.Succeeded = incremented(cur, found, c.GetIncrementBy())
	} else {
		resp.Succeeded = found == c.GetExpectExists() && (!found || bytes.Equal(cur, c.GetExpectedValue()))
	}
	switch {
	case !resp.Succeeded:
	case c.GetDelete():
		data.del(c.GetKey())
	default:
		data.put(c.GetKey(), nv, ttl{expiresAt: c.GetExpiresAt(), keep: c.GetKeepTtl()})
	}
	return applyResult{cas: resp}
}

// applySplitLocked cuts the range at the split key. Every replica does this
// at the same log index, and the new right-hand range starts with the data
// already in place: nothing is copied.
func (r *Replica) applySplitLocked(ab *applyBatch, sc *tidekvpb.SplitCommand) (applyResult, []func()) {
	d := r.mu.state.GetDesc()
	key := sc.GetSplitKey()
	if r.rangeID == keys.MetaRangeID || bytes.Compare(key, d.GetStartKey()) <= 0 ||
		(len(d.GetEndKey()) > 0 && bytes.Compare(key, d.GetEndKey()) >= 0) {
		return applyResult{err: &KeyMismatchError{Key: key, Desc: d}}, nil
	}
	left := proto.Clone(d).(*tidekvpb.RangeDescriptor)
	left.EndKey = append([]byte(nil), key...)
	left.Generation++
	right := proto.Clone(d).(*tidekvpb.RangeDescriptor)
	right.RangeId = sc.GetNewRangeId()
	right.StartKey = append([]byte(nil), key...)
	right.Generation = left.Generation
	// The right range is born with the left's membership, so replicas of a
	// range in the middle of a change carry the joint state over; its data
	// keeps the left's layout, GC threshold and version bound.
	r.saveVersionBoundLocked()
	rightState, err := writeInitialRangeState(ab.eng, ab.b, right, r.mu.state.GetLayout(), r.mu.state)
	if err != nil {
		log.Fatalf("range %d: split: %v", r.rangeID, err)
	}
	r.setDescLocked(left)
	log.Printf("range %d: applied split at %q: range %d takes [%q, %q)", r.rangeID, key, right.GetRangeId(), right.GetStartKey(), right.GetEndKey())
	wasLeader, lost := r.isLeader.Load(), r.lost.Load()
	s := r.store
	post := []func(){func() {
		s.installSplitReplica(rightState, wasLeader, lost)
		s.rebuildIndex()
		if wasLeader && s.listener != nil {
			s.listener.DescriptorChanged(left)
		}
	}}
	return applyResult{split: &tidekvpb.SplitResponse{Left: left, Right: right}}, post
}

// installSplitReplica creates the right-hand replica of a split, replacing
// an uninitialized placeholder created by early messages from its leader.
// What reached the placeholder and was not stepped yet goes on to the new
// replica: above all the vote requests of the left leaseholder's immediate
// campaign, which dropped would leave the new range leaderless until an
// election timer fires. The placeholder stays locked until the new replica
// has taken its place, so a message finds one or the other
// (HandleRaftMessage).
func (s *Store) installSplitReplica(st *tidekvpb.ReplicaState, campaign, lost bool) {
	id := st.GetDesc().GetRangeId()
	old := s.GetReplica(id)
	if old != nil {
		old.mu.Lock()
		defer old.mu.Unlock()
		if old.desc.Load() != nil {
			return
		}
		old.mu.destroyed = true
		// What the placeholder wrote (a vote) is on disk before its
		// successor loads its state.
		s.logw.flush()
		old.failPendingLocked(ErrAmbiguous, &RangeNotFoundError{RangeID: id})
	}
	r, err := s.addInitializedReplica(st)
	if err != nil {
		log.Printf("range %d: creating split replica: %v", id, err)
		if old != nil {
			s.mu.Lock()
			delete(s.mu.replicas, id)
			s.mu.Unlock()
		}
		return
	}
	// The right half of lost data is lost too.
	r.lost.Store(lost)
	r.in.Lock()
	r.in.campaign = campaign
	if old != nil {
		// Not a snapshot: its data was staged for the placeholder.
		to := replicaOnNode(st.GetDesc(), s.nodeID).GetReplicaId()
		old.in.Lock()
		for _, m := range old.in.msgs {
			if m.GetTo() == to && m.GetType() != raftpb.MsgSnap {
				r.in.msgs = append(r.in.msgs, m)
			}
		}
		old.in.msgs = nil
		old.in.Unlock()
	}
	r.in.Unlock()
	s.schedule(id)
}

func (r *Replica) applyConfChangeLocked(e *raftpb.Entry) []func() {
	cc := &raftpb.ConfChangeV2{}
	if err := proto.Unmarshal(e.GetData(), cc); err != nil {
		log.Fatalf("range %d: corrupt conf change %d: %v", r.rangeID, e.GetIndex(), err)
	}
	nodeOf := map[uint64]uint64{}
	for id, n := range r.mu.peerNodes {
		nodeOf[id] = n
	}
	// A change that adds a replica carries the descriptor it proposes: the
	// new replica's node, and whether it is an adaptive learner.
	adaptive := map[uint64]bool{}
	if len(cc.GetContext()) > 0 {
		crc := &tidekvpb.ChangeReplicasCommand{}
		if err := proto.Unmarshal(cc.GetContext(), crc); err == nil {
			for _, rd := range crc.GetDesc().GetReplicas() {
				nodeOf[rd.GetReplicaId()] = rd.GetNodeId()
				adaptive[rd.GetReplicaId()] = rd.GetAdaptive()
			}
		}
	}
	if r.frozenErrLocked() != nil {
		// A frozen range keeps its replicas (a merge depends on them):
		// applying an empty change is how Raft rejects one.
		r.mu.raw.ApplyConfChange(&raftpb.ConfChangeV2{})
		log.Printf("range %d: replica change at index %d rejected: frozen for a merge", r.rangeID, e.GetIndex())
		return nil
	}
	cs := r.mu.raw.ApplyConfChange(cc)
	desc := descWithConfState(r.mu.state.GetDesc(), cs, nodeOf, adaptive)
	r.mu.state.ConfState = cs
	r.setDescLocked(desc)
	log.Printf("range %d: applied replica change at index %d: %s", r.rangeID, e.GetIndex(), FormatReplicas(desc))
	if f := r.store.cfg.testingEnteredJoint; f != nil && len(cs.GetVotersOutgoing()) > 0 && r.isLeader.Load() {
		f(r)
	}
	member := false
	for _, rd := range desc.GetReplicas() {
		if rd.GetReplicaId() == r.mu.replicaID {
			member = true
		}
	}
	if !member {
		// Stop applying; once this round's batch is written, remove the
		// replica and its data.
		r.mu.removalPending = true
		return []func(){func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.store.destroyReplicaLocked(r, "removed from the range by a replica change")
		}}
	}
	if r.isLeader.Load() && r.store.listener != nil {
		l := r.store.listener
		return []func(){func() { l.DescriptorChanged(desc) }}
	}
	return nil
}

// FormatReplicas renders a descriptor's replicas as n1(v),n2(l),...: v for
// voters, l for learners, a for adaptive learners, v+ and v- for incoming and
// outgoing voters of a joint configuration.
func FormatReplicas(d *tidekvpb.RangeDescriptor) string {
	var b bytes.Buffer
	for i, rd := range d.GetReplicas() {
		if i > 0 {
			b.WriteByte(',')
		}
		t := map[tidekvpb.ReplicaType]string{
			tidekvpb.ReplicaType_VOTER: "v", tidekvpb.ReplicaType_LEARNER: "l",
			tidekvpb.ReplicaType_VOTER_INCOMING: "v+", tidekvpb.ReplicaType_VOTER_OUTGOING: "v-",
		}[rd.GetType()]
		if rd.GetType() == tidekvpb.ReplicaType_LEARNER && rd.GetAdaptive() {
			t = "a"
		}
		fmt.Fprintf(&b, "n%d(%s)", rd.GetNodeId(), t)
	}
	return b.String()
}
