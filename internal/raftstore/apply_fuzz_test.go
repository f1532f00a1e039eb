package raftstore

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// FuzzApplyCommand decodes arbitrary bytes as a Raft log entry's command
// and applies it to a replica of the range [c, m), as every replica does
// at the entry's index. Client commands (writes, guarded writes, CAS) must
// never panic, never touch a key outside the range, and write nothing when
// they fail. Internal commands (splits, merges, meta) come only from this
// node's own code and are left out.
func FuzzApplyCommand(f *testing.F) {
	add := func(cmd *tidekvpb.RaftCommand) {
		b, err := proto.Marshal(cmd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	add(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: []byte("d"), Value: []byte("1")}, {Key: []byte("e"), Delete: true}}})
	add(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: []byte("d"), Value: []byte("1")}, {Key: []byte("z"), Value: []byte("out")}}})
	add(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: []byte("h"), Value: []byte("v")}}, WantExisted: true,
		WriteGuard: &tidekvpb.LogGuard{Key: []byte("h"), ClearStart: []byte("h\x00"), ClearEnd: []byte("h\x01")}})
	add(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: []byte("h"), Value: []byte("v")}},
		WriteGuard: &tidekvpb.LogGuard{Key: []byte("h"), ClearStart: []byte("a"), ClearEnd: []byte("z")}})
	add(&tidekvpb.RaftCommand{Cas: &tidekvpb.LogCompareAndSet{Key: []byte("k"), NewValue: []byte("2")}})
	add(&tidekvpb.RaftCommand{Cas: &tidekvpb.LogCompareAndSet{Key: []byte("q"), NewValue: []byte("2")}})

	desc := &tidekvpb.RangeDescriptor{RangeId: 7, Generation: 1, StartKey: []byte("c"), EndKey: []byte("m"), NextReplicaId: 2,
		Replicas: []*tidekvpb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}}
	cfg := DefaultConfig()
	cfg.SnapshotDir = f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd := &tidekvpb.RaftCommand{}
		if proto.Unmarshal(data, cmd) != nil {
			return // a corrupt entry is a storage fault: the node stops (apply.go)
		}
		if cmd.GetMeta() != nil || cmd.GetSplit() != nil || cmd.GetMerge() != nil || cmd.GetFreezeInto() != 0 || cmd.GetUnfreeze() {
			return
		}
		eng := storage.NewMem()
		s, err := NewStore(cfg, 1, eng, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Bootstrap([]*tidekvpb.RangeDescriptor{desc}, LogVersionBase); err != nil {
			t.Fatal(err)
		}
		r := s.GetReplica(7)
		lo, hi := keys.DataSpan(7, nil, nil)
		before := dataKeys(t, eng, lo, hi)

		ab := newApplyBatch(eng)
		r.mu.Lock()
		res, _ := r.applyCommandLocked(ab, cmd, r.mu.state.GetAppliedIndex()+1)
		r.mu.Unlock()
		if err := ab.commit(); err != nil {
			t.Fatal(err)
		}
		after := dataKeys(t, eng, lo, hi)
		for _, k := range after {
			if !keys.Contains(desc.GetStartKey(), desc.GetEndKey(), keys.UserKey(k)) {
				t.Fatalf("command %v wrote %q, outside the range [c, m)", cmd, keys.UserKey(k))
			}
		}
		var km *KeyMismatchError
		failed := res.err != nil || (res.write != nil && res.write.GetGuardFailed())
		if failed && len(after) != len(before) {
			t.Fatalf("command %v failed (%v) yet wrote %d keys", cmd, res.err, len(after)-len(before))
		}
		if res.err != nil && !errors.As(res.err, &km) {
			t.Fatalf("command %v: unexpected error %v", cmd, res.err)
		}
	})
}

// dataKeys lists the engine keys in [lo, hi).
func dataKeys(t *testing.T, eng storage.Engine, lo, hi []byte) [][]byte {
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, bytes.Clone(it.Key()))
	}
	return out
}
