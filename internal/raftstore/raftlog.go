package raftstore

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// Fresh ranges (bootstrap and split) start their log at this index and term,
// so a replica created from nothing always needs a snapshot: its empty log
// can never match entries the leader still has.
const (
	initialIndex uint64 = 10
	initialTerm  uint64 = 5
)

// raftStorage serves raft.Storage from memory; every entry and HardState is
// also written to the engine before raft is told it is stable, and loaded
// back on restart. The log is truncated to a bounded length, so keeping it
// in memory is cheap. Snapshot is overridden: a snapshot is made on demand
// from the replica's current applied state (see Replica.snapshotLocked).
type raftStorage struct {
	*raft.MemoryStorage
	snapshot func() (*raftpb.Snapshot, error)
}

func (s *raftStorage) Snapshot() (*raftpb.Snapshot, error) { return s.snapshot() }

// loadRaftState rebuilds a replica's in-memory log from the engine.
func loadRaftState(eng storage.Reader, rangeID uint64, st *tidekvpb.ReplicaState) (*raft.MemoryStorage, error) {
	ms := raft.NewMemoryStorage()
	// The snapshot slot only tells raft where the log starts and which
	// configuration is current as of the applied index.
	if err := ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index:     new(st.GetTruncatedIndex()),
		Term:      new(st.GetTruncatedTerm()),
		ConfState: st.GetConfState(),
	}}); err != nil {
		return nil, err
	}
	hs, err := loadHardState(eng, rangeID)
	if err != nil {
		return nil, err
	}
	if hs != nil {
		// The HardState's commit index is written only with a change of
		// term or vote (hardStateDurableLocked), and applied entries
		// without fsync, so the applied index is usually ahead of it; they
		// were committed, or they would not have been applied.
		if hs.GetCommit() < st.GetAppliedIndex() {
			hs.Commit = new(st.GetAppliedIndex())
		}
		if err := ms.SetHardState(hs); err != nil {
			return nil, err
		}
	}
	lo, hi := keys.LogSpan(rangeID)
	it, err := eng.NewIter(keys.LogKey(rangeID, st.GetTruncatedIndex()+1), hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	_ = lo
	var ents []*raftpb.Entry
	next := st.GetTruncatedIndex() + 1
	for ok := it.First(); ok; ok = it.Next() {
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return nil, fmt.Errorf("range %d: decode log entry: %w", rangeID, err)
		}
		if e.GetIndex() != next {
			return nil, fmt.Errorf("range %d: log gap: want index %d, found %d", rangeID, next, e.GetIndex())
		}
		next++
		ents = append(ents, e)
	}
	if err := ms.Append(ents); err != nil {
		return nil, err
	}
	return ms, nil
}

func loadHardState(eng storage.Reader, rangeID uint64) (*raftpb.HardState, error) {
	v, ok, err := eng.Get(keys.HardStateKey(rangeID))
	if err != nil || !ok {
		return nil, err
	}
	hs := &raftpb.HardState{}
	if err := proto.Unmarshal(v, hs); err != nil {
		return nil, err
	}
	return hs, nil
}

func loadReplicaState(eng storage.Reader, rangeID uint64) (*tidekvpb.ReplicaState, error) {
	v, ok, err := eng.Get(keys.ReplicaStateKey(rangeID))
	if err != nil || !ok {
		return nil, err
	}
	st := &tidekvpb.ReplicaState{}
	if err := proto.Unmarshal(v, st); err != nil {
		return nil, err
	}
	return st, nil
}

func loadTombstone(eng storage.Reader, rangeID uint64) (uint64, error) {
	v, ok, err := eng.Get(keys.TombstoneKey(rangeID))
	if err != nil || !ok {
		return 0, err
	}
	ts := &tidekvpb.Tombstone{}
	if err := proto.Unmarshal(v, ts); err != nil {
		return 0, err
	}
	return ts.GetNextReplicaId(), nil
}

func putProto(w storage.Writer, key []byte, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return w.Set(key, b)
}

// encoder builds keys and values for a storage.Writer in buffers it
// reuses: a Writer copies what it is given, so one key and one value
// buffer serve every write of a round. One goroutine owns each encoder
// (the log writer's, the apply batch's).
type encoder struct {
	key, val []byte
	// hs is the HardState persistAppend writes: the MemoryStorage keeps
	// the one it is given, this one is only marshaled.
	hs raftpb.HardState
}

// encoderKeep: a value buffer that grew past this (a large entry) is
// dropped after use rather than kept for the next.
const encoderKeep = 64 << 10

// put writes m, marshaled as proto.Marshal does, under key.
func (e *encoder) put(w storage.Writer, key []byte, m proto.Message) error {
	val, err := proto.MarshalOptions{}.MarshalAppend(e.val[:0], m)
	if err != nil {
		return err
	}
	err = w.Set(key, val)
	if cap(val) <= encoderKeep {
		e.val = val
	}
	return err
}

// writeInitialRangeState writes the Raft and applied state of a range that
// starts life at initialIndex (bootstrap or the right side of a split),
// its data in layout; the right side of a split inherits the left's GC
// threshold and version bound. A HardState already on disk (an
// uninitialized replica that voted) is kept if it is newer.
func writeInitialRangeState(eng storage.Reader, w storage.Writer, desc *tidekvpb.RangeDescriptor, layout tidekvpb.DataLayout, inherit *tidekvpb.ReplicaState) (*tidekvpb.ReplicaState, error) {
	cs := confStateFromDesc(desc)
	st := &tidekvpb.ReplicaState{
		AppliedIndex:   initialIndex,
		Desc:           desc,
		ConfState:      cs,
		TruncatedIndex: initialIndex,
		TruncatedTerm:  initialTerm,
		Layout:         layout,
		GcThreshold:    inherit.GetGcThreshold(),
		MayHoldIntents: inherit.GetMayHoldIntents(),
	}
	recordVersionBound(st, versionBoundOf(inherit))
	hs := &raftpb.HardState{Term: new(initialTerm), Commit: new(initialIndex)}
	if old, err := loadHardState(eng, desc.GetRangeId()); err != nil {
		return nil, err
	} else if old != nil && old.GetTerm() > initialTerm {
		hs.Term, hs.Vote = new(old.GetTerm()), new(old.GetVote())
	}
	if err := putProto(w, keys.HardStateKey(desc.GetRangeId()), hs); err != nil {
		return nil, err
	}
	if err := putProto(w, keys.ReplicaStateKey(desc.GetRangeId()), st); err != nil {
		return nil, err
	}
	return st, nil
}

// confStateFromDesc derives the Raft configuration a descriptor describes.
func confStateFromDesc(desc *tidekvpb.RangeDescriptor) *raftpb.ConfState {
	cs := &raftpb.ConfState{}
	joint := false
	for _, r := range desc.GetReplicas() {
		switch r.GetType() {
		case tidekvpb.ReplicaType_VOTER:
			cs.Voters = append(cs.Voters, r.GetReplicaId())
		case tidekvpb.ReplicaType_LEARNER:
			cs.Learners = append(cs.Learners, r.GetReplicaId())
		case tidekvpb.ReplicaType_VOTER_INCOMING:
			cs.Voters = append(cs.Voters, r.GetReplicaId())
			joint = true
		case tidekvpb.ReplicaType_VOTER_OUTGOING:
			cs.VotersOutgoing = append(cs.VotersOutgoing, r.GetReplicaId())
			joint = true
		}
	}
	if joint {
		for _, r := range desc.GetReplicas() {
			if r.GetType() == tidekvpb.ReplicaType_VOTER {
				cs.VotersOutgoing = append(cs.VotersOutgoing, r.GetReplicaId())
			}
		}
		cs.AutoLeave = new(true)
	}
	return cs
}

// descWithConfState rebuilds a descriptor's replica list from the Raft
// configuration that resulted from a conf change. nodeOf maps replica IDs
// (old and newly added) to node IDs. Learners keep their adaptive flag from
// old; newAdaptive marks learners the change adds as adaptive (replicas
// already in old ignore it). A replica that is no longer a learner loses
// the flag.
func descWithConfState(old *tidekvpb.RangeDescriptor, cs *raftpb.ConfState, nodeOf map[uint64]uint64, newAdaptive map[uint64]bool) *tidekvpb.RangeDescriptor {
	adaptive := map[uint64]bool{}
	for id, a := range newAdaptive {
		adaptive[id] = a
	}
	for _, rd := range old.GetReplicas() {
		adaptive[rd.GetReplicaId()] = rd.GetAdaptive()
	}
	d := proto.Clone(old).(*tidekvpb.RangeDescriptor)
	d.Replicas = nil
	in := func(ids []uint64, id uint64) bool {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	joint := len(cs.GetVotersOutgoing()) > 0
	seen := map[uint64]bool{}
	add := func(id uint64, t tidekvpb.ReplicaType) {
		if seen[id] {
			return
		}
		seen[id] = true
		d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: nodeOf[id], ReplicaId: id, Type: t,
			Adaptive: t == tidekvpb.ReplicaType_LEARNER && adaptive[id]})
		if id >= d.NextReplicaId {
			d.NextReplicaId = id + 1
		}
	}
	for _, id := range cs.GetVoters() {
		switch {
		case !joint || in(cs.GetVotersOutgoing(), id):
			add(id, tidekvpb.ReplicaType_VOTER)
		default:
			add(id, tidekvpb.ReplicaType_VOTER_INCOMING)
		}
	}
	for _, id := range cs.GetVotersOutgoing() {
		add(id, tidekvpb.ReplicaType_VOTER_OUTGOING)
	}
	for _, id := range cs.GetLearners() {
		add(id, tidekvpb.ReplicaType_LEARNER)
	}
	for _, id := range cs.GetLearnersNext() {
		add(id, tidekvpb.ReplicaType_LEARNER)
	}
	d.Generation++
	return d
}
