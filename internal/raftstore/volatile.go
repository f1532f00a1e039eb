package raftstore

import (
	"log"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// A range whose data a node keeps in memory (a memory key space's,
// storage.Volatile) has lost it when the node restarts, while its Raft
// state, in Pebble, still says which entries it applied. Serving that
// state would answer reads with nothing, and applying later entries on it
// would leave this replica's data unlike the others'. Its log cannot be
// replayed (it is truncated), and etcd raft sends a snapshot only to a
// follower whose log lacks what the leader has. So such a replica is
// dropped at start with its log, and comes back as a new, uninitialized
// replica that the leader refills by snapshot (HandleRaftMessage), with
// two precautions etcd raft needs:
//
//   - Its term goes up by one (with no vote). The leader remembers how far
//     this replica's log matched and would tell it to commit entries it no
//     longer has, which etcd raft takes for a corrupt log and panics on. At
//     the higher term the replica ignores that leader, its answer makes the
//     leader step down, and the next leader, knowing nothing of this
//     replica's log, probes it and sends a snapshot. So each such restart
//     costs its ranges an election.
//   - It casts no vote until the snapshot arrives (RefillKey, kept across
//     another restart). The dropped log held entries that counted towards
//     commits; voting with an empty log could elect a leader that lacks
//     them. A range then needs its other voters to elect a leader: with 3
//     voters, one restart is survived with no acknowledged write lost, and
//     a second voter down before the refill leaves the range unavailable
//     (not wrong) until one of them is back.
//
// Where no other voter holds the data (a range with one voter), there is
// nothing to refill from: the replica keeps its log and starts again with
// no data at the index it had applied, which a cache allows and nothing
// else could do.

// UserDataSpans are the engine spans that hold user data of keys in
// [start, end) of ranges other than the meta range, in each layout: what
// a memory key space's engine must own.
func UserDataSpans(start, end []byte) [2][2][]byte {
	d := &tidekvpb.RangeDescriptor{RangeId: keys.FirstUserRangeID, StartKey: start, EndKey: end}
	ulo, uhi := dataSpan(d, false)
	vlo, vhi := dataSpan(d, true)
	return [2][2][]byte{{ulo, uhi}, {vlo, vhi}}
}

// dropIfDataLost drops the replica of st at start if its data was in
// volatile spans and another voter can refill it; it reports whether it did.
func (s *Store) dropIfDataLost(st *tidekvpb.ReplicaState) (bool, error) {
	v, ok := s.eng.(storage.Volatile)
	desc := st.GetDesc()
	if !ok || !v.Volatile(dataSpan(desc, isMVCC(st))) {
		return false, nil
	}
	id := desc.GetRangeId()
	others := 0
	for _, rd := range desc.GetReplicas() {
		if rd.GetType() == tidekvpb.ReplicaType_VOTER && rd.GetNodeId() != s.nodeID {
			others++
		}
	}
	if others == 0 {
		log.Printf("range %d: its data was in memory and went with the restart; no other voter holds it, so the range starts again empty at applied index %d", id, st.GetAppliedIndex())
		return false, nil
	}
	hs, err := loadHardState(s.eng, id)
	if err != nil {
		return false, err
	}
	b := s.eng.NewBatch()
	defer b.Close()
	_ = b.Delete(keys.ReplicaStateKey(id))
	lo, hi := keys.LogSpan(id)
	_ = b.DeleteRange(lo, hi)
	_ = b.Set(keys.RefillKey(id), nil)
	if err := putProto(b, keys.HardStateKey(id), &raftpb.HardState{Term: new(hs.GetTerm() + 1)}); err != nil {
		return false, err
	}
	if err := b.Commit(true); err != nil {
		return false, err
	}
	s.stats.ReplicasRefilled.Add(1)
	log.Printf("range %d: its data was in memory and went with the restart: replica dropped, at the next term and casting no vote, to be refilled by a snapshot from the other %d voter(s)", id, others)
	return true, nil
}

// awaitsRefill reports whether rangeID's replica was dropped at start and
// has not been refilled yet (it votes for no one).
func (s *Store) awaitsRefill(rangeID uint64) (bool, error) {
	_, ok, err := s.eng.Get(keys.RefillKey(rangeID))
	return ok, err
}

// refusesToVote: a replica awaiting its refill drops vote requests.
func (r *Replica) refusesToVote(t raftpb.MessageType) bool {
	return r.awaitingRefill.Load() && (t == raftpb.MsgVote || t == raftpb.MsgPreVote)
}
