package raftstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// addAdaptiveLearner adds a node to the cluster and an adaptive learner of
// the test range on it, and returns the learner.
func (tc *testCluster) addAdaptiveLearner() *Replica {
	tc.t.Helper()
	n := tc.addNode()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := tc.leader(testRangeID).AddLearner(ctx, n)
	if err != nil {
		tc.t.Fatal(err)
	}
	if rd := replicaOnNode(d, n); !isAdaptiveLearner(rd) {
		tc.t.Fatalf("after AddLearner: %s", FormatReplicas(d))
	}
	return tc.stores[n].GetReplica(testRangeID)
}

func TestAdaptiveLearnerServesStaleReads(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v1")
	l := tc.addAdaptiveLearner()
	ctx := context.Background()
	read := func(ro ReadOptions) (string, error) {
		v, _, err := l.Get(ctx, []byte("k"), ro)
		return string(v), err
	}
	// Linearizable reads are the leaseholder's; a learner never holds it.
	var nl *NotLeaderError
	if _, err := read(ReadOptions{}); !errors.As(err, &nl) {
		t.Fatalf("linearizable read on the learner: %v", err)
	}
	// No closed timestamp yet: no bound can be vouched for.
	var stale *StaleReplicaError
	if _, err := read(bounded(time.Second)); !errors.As(err, &stale) {
		t.Fatalf("bounded read before any closed timestamp: %v", err)
	}
	waitFor(t, func() bool { v, err := read(anyRead); return err == nil && v == "v1" })

	tc.publishClosed()
	waitFor(t, func() bool { v, err := read(bounded(time.Second)); return err == nil && v == "v1" })

	// A newer write: once the learner applied the next closed timestamp
	// its bounded reads see it; scans too.
	tc.put("k", "v2")
	waitFor(t, func() bool {
		tc.publishClosed()
		v, err := read(bounded(time.Second))
		return err == nil && v == "v2"
	})
	kvs, _, err := l.Scan(ctx, nil, nil, 10, 1<<20, bounded(time.Second))
	if err != nil || len(kvs) != 1 || string(kvs[0].GetValue()) != "v2" {
		t.Fatalf("bounded scan on the learner: %v %v", kvs, err)
	}
	if _, _, err := l.Scan(ctx, nil, nil, 10, 1<<20, ReadOptions{}); !errors.As(err, &nl) {
		t.Fatalf("linearizable scan on the learner: %v", err)
	}
	// Writes and admin calls are refused too.
	if _, err := l.Write(ctx, nil); !errors.As(err, &nl) {
		t.Fatalf("write on the learner: %v", err)
	}
	if _, err := l.SizeSplitKey(ctx); !errors.As(err, &nl) {
		t.Fatalf("SizeSplitKey on the learner: %v", err)
	}
}

// The adaptive mark is in the persisted descriptor of every replica: a full
// restart of the cluster keeps it; ChangeReplicas refuses to promote the
// learner, and removes it at the replication factor.
func TestAdaptiveLearnerAcrossRestartAndRemoval(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.put("k", "v")
	l := tc.addAdaptiveLearner()
	ln := l.store.nodeID
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, id := range tc.nodes {
		tc.crash(id)
	}
	for _, id := range tc.nodes {
		tc.restart(id)
	}
	ld := tc.leader(testRangeID)
	for _, id := range tc.nodes {
		d := tc.stores[id].GetReplica(testRangeID).Desc()
		if !isAdaptiveLearner(replicaOnNode(d, ln)) || countVoters(d) != 3 {
			t.Fatalf("n%d after restart: %s", id, FormatReplicas(d))
		}
	}
	if _, err := ld.ChangeReplicas(ctx, ln, 0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("promoting the adaptive learner: %v", err)
	}
	if _, err := ld.AddLearner(ctx, ld.store.nodeID); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("adaptive learner on a voter's node: %v", err)
	}
	// Idempotent: the learner is there already.
	if d, err := ld.AddLearner(ctx, ln); err != nil || !isAdaptiveLearner(replicaOnNode(d, ln)) {
		t.Fatalf("AddLearner again: %v", err)
	}
	d, err := ld.ChangeReplicas(ctx, 0, ln)
	if err != nil {
		t.Fatalf("removing the adaptive learner at the replication factor: %v", err)
	}
	if replicaOnNode(d, ln) != nil || countVoters(d) != 3 {
		t.Fatalf("after removal: %s", FormatReplicas(d))
	}
	waitFor(t, func() bool { return tc.stores[ln].GetReplica(testRangeID) == nil })
	if _, ok, _ := tc.engines[ln].Get(dataKey("k")); ok {
		t.Fatal("removed learner left its data behind")
	}
}

// descWithConfState keeps adaptive marks through conf changes of other
// replicas, marks only the learners a change adds as adaptive, and drops
// the mark from a replica that stops being a learner.
func TestDescWithConfStateKeepsAdaptive(t *testing.T) {
	raw, _, desc := threeVoterRawNode(t, &Config{ElectionTicks: 10, HeartbeatTicks: 1, MaxSizePerMsg: 1 << 20,
		MaxInflightMsgs: 16, MaxUncommittedBytes: 1 << 20}, 1)
	single := func(typ raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeSingle {
		return &raftpb.ConfChangeSingle{Type: typ.Enum(), NodeId: proto.Uint64(id)}
	}
	nodeOf := nodeOfReplica(1, 2, 3, 4, 5, 6)
	adaptive := func(d *tidekvpb.RangeDescriptor) (ids []uint64) {
		for _, rd := range d.GetReplicas() {
			if rd.GetAdaptive() {
				ids = append(ids, rd.GetReplicaId())
			}
		}
		return ids
	}
	for _, step := range []struct {
		name        string
		cc          *raftpb.ConfChangeV2
		newAdaptive map[uint64]bool
		want        string // adaptive replica IDs
	}{
		{"add adaptive learner 4", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddLearnerNode, 4)}},
			map[uint64]bool{4: true}, "[4]"},
		// The proposal's context lists every replica; only new ones count.
		{"add plain learner 5", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddLearnerNode, 5)}},
			map[uint64]bool{4: false, 5: false}, "[4]"},
		{"promote 5, remove 3 (joint)", &raftpb.ConfChangeV2{Transition: raftpb.ConfChangeTransitionJointImplicit.Enum(),
			Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddNode, 5), single(raftpb.ConfChangeRemoveNode, 3)}}, nil, "[4]"},
		{"leave joint", &raftpb.ConfChangeV2{}, nil, "[4]"},
		{"add adaptive learner 6", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddLearnerNode, 6)}},
			map[uint64]bool{6: true}, "[4 6]"},
		{"remove 1", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeRemoveNode, 1)}}, nil, "[4 6]"},
		// Raft itself could promote it (raftstore never asks): a voter is
		// not adaptive.
		{"promote 4", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddNode, 4)}}, nil, "[6]"},
		{"remove 6", &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeRemoveNode, 6)}}, nil, "[]"},
	} {
		cs := raw.ApplyConfChange(step.cc)
		nd := descWithConfState(desc, cs, nodeOf, step.newAdaptive)
		if got := fmt.Sprint(adaptive(nd)); got != step.want {
			t.Fatalf("%s: adaptive %s, want %s (%s)", step.name, got, step.want, FormatReplicas(nd))
		}
		if err := confStateFromDesc(nd).Equivalent(cs); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		desc = nd
	}
}
