package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// FuzzApplyTxnCommands decodes arbitrary bytes as a sequence of Raft
// commands (each a length-prefixed RaftCommand, protowire bytes) and applies
// them in order to a replica of the range [c, m) on the versioned layout:
// intents, records (heartbeat, end, push, forget), resolutions and
// one-phase commits, mixed with plain writes and CAS, which meet intents.
// Internal commands (splits, merges, meta, migrations, GC) come only from
// this node's own code and are left out. After every command:
//   - nothing panicked, and every key written lies in the range;
//   - a command that failed wrote nothing, and failed in a way apply
//     refuses commands (no other error);
//   - an intent is its key's newest version, so a key holds at most one;
//   - a resolve left no intent of its transaction on the keys it named;
//   - a final record (COMMITTED or ABORTED) keeps its status and commit
//     timestamp until it is forgotten.
//
// The seed corpus is testdata/fuzz/FuzzApplyTxnCommands (its files'
// names say what each sequence does); TestDataDriven does not read it.
func FuzzApplyTxnCommands(f *testing.F) {
	desc := &tidekvpb.RangeDescriptor{RangeId: 7, Generation: 1, StartKey: []byte("c"), EndKey: []byte("m"), NextReplicaId: 2,
		Replicas: []*tidekvpb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}}
	cfg := DefaultConfig()
	cfg.SnapshotDir = f.TempDir()
	lo, hi := mvcc.EngineSpan(keys.VersionedSpan(nil, nil))
	inLo, inHi := mvcc.EngineSpan(keys.VersionedSpan(desc.GetStartKey(), desc.GetEndKey()))
	f.Fuzz(func(t *testing.T, data []byte) {
		cmds, ok := txnFuzzCommands(data)
		if !ok {
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
		index := r.mu.state.GetAppliedIndex()
		apply := func(cmd *tidekvpb.RaftCommand) applyResult {
			index++
			ab := newApplyBatch(eng)
			r.mu.Lock()
			res, post := r.applyCommandLocked(ab, cmd, index)
			r.mu.Unlock()
			if err := ab.commit(); err != nil {
				t.Fatal(err)
			}
			for _, p := range post {
				p()
			}
			return res
		}
		// As every range's leaseholder does before its first transaction.
		if res := apply(&tidekvpb.RaftCommand{Timestamp: logTimestamp(hlc.Timestamp{WallTime: 1}), MigrateLayout: &tidekvpb.MigrateLayoutCommand{}}); res.err != nil {
			t.Fatal(res.err)
		}
		for _, cmd := range cmds {
			before := engineKVs(t, eng, lo, hi)
			records := finalRecords(t, r, cmd)
			res := apply(cmd)
			after := engineKVs(t, eng, lo, hi)
			for _, kv := range after {
				if bytes.Compare(kv[0], inLo) < 0 || bytes.Compare(kv[0], inHi) >= 0 {
					t.Fatalf("command %v wrote engine key %q, outside the range [c, m)", cmd, kv[0])
				}
			}
			failed := res.err != nil || (res.write != nil && res.write.GetGuardFailed())
			if failed && fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("command %v failed (%v) yet changed the data", cmd, res.err)
			}
			if res.err != nil && !refusedAtApply(res.err) {
				t.Fatalf("command %v: unexpected error %v", cmd, res.err)
			}
			checkIntentsNewest(t, eng, after, cmd)
			if c := cmd.GetTxn(); c.GetOp() == tidekvpb.TxnCommand_RESOLVE && res.err == nil {
				for _, k := range c.GetKeys() {
					if ver, ref := r.newestVersion(k); ref != nil && bytes.Equal(ref.GetId(), c.GetTxn().GetId()) {
						t.Fatalf("command %v resolved %q, yet its intent at %s is there", cmd, k, ver.Timestamp)
					}
				}
			}
			for rk, was := range records {
				if now, found := recordAt(t, r, []byte(rk)); found && (now.GetStatus() != was.GetStatus() || !proto.Equal(now.GetCommitTimestamp(), was.GetCommitTimestamp())) {
					t.Fatalf("command %v changed a final record from %v to %v", cmd, was, now)
				}
			}
		}
	})
}

// txnFuzzCommands decodes data as length-prefixed RaftCommands, leaving out
// the internal ones; false when data does not decode.
func txnFuzzCommands(data []byte) ([]*tidekvpb.RaftCommand, bool) {
	var cmds []*tidekvpb.RaftCommand
	for len(data) > 0 && len(cmds) < 32 {
		b, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return nil, false
		}
		data = data[n:]
		cmd := &tidekvpb.RaftCommand{}
		if proto.Unmarshal(b, cmd) != nil {
			return nil, false // a corrupt entry is a storage fault: the node stops (apply.go)
		}
		if cmd.GetMeta() != nil || cmd.GetSplit() != nil || cmd.GetMerge() != nil || cmd.GetFreezeInto() != 0 || cmd.GetUnfreeze() ||
			cmd.GetMigrateLayout() != nil || cmd.GetGc() != nil || cmd.GetResetLost() != nil {
			continue
		}
		cmds = append(cmds, cmd)
	}
	return cmds, len(cmds) > 0
}

// refusedAtApply reports whether err is one of the ways apply refuses a
// command, with nothing written.
func refusedAtApply(err error) bool {
	var (
		km  *KeyMismatchError
		ie  *IntentError
		wto *WriteTooOldError
		tse *TxnStatusError
		rce *ReadChangedError
		gce *GCThresholdError
	)
	return errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrLogVersion) || errors.As(err, &km) || errors.As(err, &ie) || errors.As(err, &wto) ||
		errors.As(err, &tse) || errors.As(err, &rce) || errors.As(err, &gce)
}

// engineKVs lists the engine's keys and values in [lo, hi).
func engineKVs(t *testing.T, eng storage.Engine, lo, hi []byte) [][2][]byte {
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out [][2][]byte
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, [2][]byte{bytes.Clone(it.Key()), bytes.Clone(it.Value())})
	}
	return out
}

// checkIntentsNewest fails t when a key's intent is not its newest
// version (versions come newest first in engine order).
func checkIntentsNewest(t *testing.T, eng storage.Engine, kvs [][2][]byte, cmd *tidekvpb.RaftCommand) {
	t.Helper()
	var prev []byte
	for _, kv := range kvs {
		if mvcc.IsRecordKey(kv[0]) {
			continue
		}
		vk, ts, err := mvcc.DecodeKey(kv[0])
		if err != nil {
			t.Fatalf("after command %v: engine key %q: %v", cmd, kv[0], err)
		}
		newest := !bytes.Equal(vk, prev)
		prev = vk
		ver, err := mvcc.Get(eng, vk, ts)
		if err != nil {
			t.Fatalf("after command %v: %q at %s: %v", cmd, vk, ts, err)
		}
		if ver.Txn != nil && !newest {
			t.Fatalf("after command %v: %q holds an intent at %s below a newer version", cmd, keys.UserKey(vk), ts)
		}
	}
}

// finalRecords are the final records (key to record) cmd may touch.
func finalRecords(t *testing.T, r *Replica, cmd *tidekvpb.RaftCommand) map[string]*tidekvpb.TxnRecord {
	ref := cmd.GetTxn().GetTxn()
	if ref == nil || cmd.GetTxn().GetOp() == tidekvpb.TxnCommand_FORGET {
		return nil
	}
	rk := mvcc.RecordKey(keys.VersionedKey(ref.GetAnchor()), ref.GetId())
	if rec, found := recordAt(t, r, rk); found && rec.GetStatus() != tidekvpb.TxnStatus_TXN_PENDING {
		return map[string]*tidekvpb.TxnRecord{string(rk): rec}
	}
	return nil
}

// recordAt reads the record stored at rk.
func recordAt(t *testing.T, r *Replica, rk []byte) (*tidekvpb.TxnRecord, bool) {
	ab := newApplyBatch(r.store.eng)
	defer ab.b.Close()
	raw, found := ab.mustGet(r, rk)
	rec := &tidekvpb.TxnRecord{}
	if found {
		if err := proto.Unmarshal(raw, rec); err != nil {
			t.Fatalf("record %q: %v", rk, err)
		}
	}
	return rec, found
}
