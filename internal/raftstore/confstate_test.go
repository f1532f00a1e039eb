package raftstore

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Node IDs are ten times the replica IDs throughout, so a mix-up of the two
// shows in the output.
func nodeOfReplica(ids ...uint64) map[uint64]uint64 {
	m := map[uint64]uint64{}
	for _, id := range ids {
		m[id] = 10 * id
	}
	return m
}

func ccDesc(gen uint64, reps ...*tidekvpb.ReplicaDescriptor) *tidekvpb.RangeDescriptor {
	d := &tidekvpb.RangeDescriptor{RangeId: 7, StartKey: []byte("a"), EndKey: []byte("q"), Generation: gen}
	for _, r := range reps {
		d.Replicas = append(d.Replicas, r)
		if r.GetReplicaId() >= d.NextReplicaId {
			d.NextReplicaId = r.GetReplicaId() + 1
		}
	}
	return d
}

func ccRep(id uint64, t tidekvpb.ReplicaType) *tidekvpb.ReplicaDescriptor {
	return &tidekvpb.ReplicaDescriptor{ReplicaId: id, NodeId: 10 * id, Type: t}
}

// threeVoterRawNode is replica id's RawNode, on storage ms, of a range
// whose voters 1, 2 and 3 (desc, from ccDesc) start from a snapshot at
// initialIndex.
func threeVoterRawNode(t *testing.T, cfg *Config, id uint64) (raw *raft.RawNode, ms *raft.MemoryStorage, desc *tidekvpb.RangeDescriptor) {
	t.Helper()
	V := tidekvpb.ReplicaType_VOTER
	desc = ccDesc(1, ccRep(1, V), ccRep(2, V), ccRep(3, V))
	ms = raft.NewMemoryStorage()
	if err := ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(initialIndex), Term: proto.Uint64(initialTerm), ConfState: confStateFromDesc(desc)}}); err != nil {
		t.Fatal(err)
	}
	raw, err := raft.NewRawNode(newRaftConfig(cfg, id, ms, initialIndex))
	if err != nil {
		t.Fatal(err)
	}
	return raw, ms, desc
}

// replicaSet renders replicas order-independently: the descriptor's order
// follows Raft's, which nothing relies on.
func replicaSet(d *tidekvpb.RangeDescriptor) string {
	var s []string
	for _, r := range d.GetReplicas() {
		s = append(s, fmt.Sprintf("%d@n%d:%s", r.GetReplicaId(), r.GetNodeId(), r.GetType()))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

func TestConfStateFromDesc(t *testing.T) {
	V, L := tidekvpb.ReplicaType_VOTER, tidekvpb.ReplicaType_LEARNER
	VI, VO := tidekvpb.ReplicaType_VOTER_INCOMING, tidekvpb.ReplicaType_VOTER_OUTGOING
	for _, tc := range []struct {
		name string
		desc *tidekvpb.RangeDescriptor
		want *raftpb.ConfState
	}{
		{"voters", ccDesc(1, ccRep(1, V), ccRep(2, V), ccRep(3, V)),
			&raftpb.ConfState{Voters: []uint64{1, 2, 3}}},
		{"learner", ccDesc(1, ccRep(1, V), ccRep(2, V), ccRep(3, V), ccRep(4, L)),
			&raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}},
		// Joint: the incoming config is VOTER+VOTER_INCOMING, the outgoing
		// one VOTER+VOTER_OUTGOING, and the joint state is left automatically.
		{"joint swap", ccDesc(1, ccRep(1, V), ccRep(2, V), ccRep(3, VO), ccRep(4, VI)),
			&raftpb.ConfState{Voters: []uint64{1, 2, 4}, VotersOutgoing: []uint64{1, 2, 3}, AutoLeave: proto.Bool(true)}},
		{"joint add only", ccDesc(1, ccRep(1, V), ccRep(2, V), ccRep(3, V), ccRep(4, VI), ccRep(5, L)),
			&raftpb.ConfState{Voters: []uint64{1, 2, 3, 4}, VotersOutgoing: []uint64{1, 2, 3}, Learners: []uint64{5}, AutoLeave: proto.Bool(true)}},
		{"joint remove only", ccDesc(1, ccRep(1, V), ccRep(2, V), ccRep(3, V), ccRep(4, VO)),
			&raftpb.ConfState{Voters: []uint64{1, 2, 3}, VotersOutgoing: []uint64{1, 2, 3, 4}, AutoLeave: proto.Bool(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := confStateFromDesc(tc.desc)
			if err := cs.Equivalent(tc.want); err != nil {
				t.Fatal(err)
			}
			// And back: the descriptor rebuilt from the configuration lists
			// the same replicas, one generation later.
			back := descWithConfState(tc.desc, cs, nodeOfReplica(1, 2, 3, 4, 5), nil)
			if got, want := replicaSet(back), replicaSet(tc.desc); got != want {
				t.Fatalf("round trip:\n got %s\nwant %s", got, want)
			}
			if back.GetGeneration() != tc.desc.GetGeneration()+1 {
				t.Fatalf("generation %d after %d", back.GetGeneration(), tc.desc.GetGeneration())
			}
			if back.GetNextReplicaId() != tc.desc.GetNextReplicaId() {
				t.Fatalf("next replica ID %d, want %d", back.GetNextReplicaId(), tc.desc.GetNextReplicaId())
			}
		})
	}
}

// TestDescWithConfStateFollowsRaft drives real conf changes through a
// RawNode, as replicas do when applying them, and checks the descriptor
// after each: types, node IDs, generation, and that confStateFromDesc of it
// gives back Raft's configuration (what a split's right-hand range and a
// snapshot rely on).
func TestDescWithConfStateFollowsRaft(t *testing.T) {
	raw, _, desc := threeVoterRawNode(t, &Config{ElectionTicks: 10, HeartbeatTicks: 1, MaxSizePerMsg: 1 << 20,
		MaxInflightMsgs: 16, MaxUncommittedBytes: 1 << 20}, 1)
	single := func(typ raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeSingle {
		return &raftpb.ConfChangeSingle{Type: typ.Enum(), NodeId: proto.Uint64(id)}
	}
	nodeOf := nodeOfReplica(1, 2, 3, 4, 5)
	for _, step := range []struct {
		name string
		cc   *raftpb.ConfChangeV2
		want string
		next uint64
	}{
		{"add learner 4", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddLearnerNode, 4)}},
			"1@n10:VOTER 2@n20:VOTER 3@n30:VOTER 4@n40:LEARNER", 5},
		{"promote 4, remove 3 (joint)", &raftpb.ConfChangeV2{Transition: raftpb.ConfChangeTransitionJointImplicit.Enum(),
			Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddNode, 4), single(raftpb.ConfChangeRemoveNode, 3)}},
			"1@n10:VOTER 2@n20:VOTER 3@n30:VOTER_OUTGOING 4@n40:VOTER_INCOMING", 5},
		{"leave joint", &raftpb.ConfChangeV2{},
			"1@n10:VOTER 2@n20:VOTER 4@n40:VOTER", 5},
		{"add learner 5", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddLearnerNode, 5)}},
			"1@n10:VOTER 2@n20:VOTER 4@n40:VOTER 5@n50:LEARNER", 6},
		{"promote 5 (simple)", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddNode, 5)}},
			"1@n10:VOTER 2@n20:VOTER 4@n40:VOTER 5@n50:VOTER", 6},
		{"remove 1 (simple)", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeRemoveNode, 1)}},
			"2@n20:VOTER 4@n40:VOTER 5@n50:VOTER", 6},
	} {
		cs := raw.ApplyConfChange(step.cc)
		nd := descWithConfState(desc, cs, nodeOf, nil)
		if got := replicaSet(nd); got != step.want {
			t.Fatalf("%s:\n got %s\nwant %s", step.name, got, step.want)
		}
		if nd.GetGeneration() != desc.GetGeneration()+1 {
			t.Fatalf("%s: generation %d after %d", step.name, nd.GetGeneration(), desc.GetGeneration())
		}
		if nd.GetNextReplicaId() != step.next {
			t.Fatalf("%s: next replica ID %d, want %d", step.name, nd.GetNextReplicaId(), step.next)
		}
		if err := confStateFromDesc(nd).Equivalent(cs); err != nil {
			t.Fatalf("%s: descriptor does not describe Raft's configuration: %v", step.name, err)
		}
		// The rest of the descriptor is carried over untouched.
		if nd.GetRangeId() != desc.GetRangeId() || string(nd.GetStartKey()) != "a" || string(nd.GetEndKey()) != "q" {
			t.Fatalf("%s: span or ID changed: %v", step.name, nd)
		}
		desc = nd
	}
	if desc.GetGeneration() != 7 {
		t.Fatalf("six changes from generation 1 ended at %d", desc.GetGeneration())
	}
}

// TestDescWithConfStateKeepsOldDescriptor: the input descriptor is shared
// (published through an atomic pointer) and must not be modified.
func TestDescWithConfStateKeepsOldDescriptor(t *testing.T) {
	V := tidekvpb.ReplicaType_VOTER
	old := ccDesc(4, ccRep(1, V), ccRep(2, V), ccRep(3, V))
	before := proto.Clone(old)
	_ = descWithConfState(old, &raftpb.ConfState{Voters: []uint64{1, 2}}, nodeOfReplica(1, 2, 3), nil)
	if !proto.Equal(old, before) {
		t.Fatalf("input descriptor modified: %v", old)
	}
}
