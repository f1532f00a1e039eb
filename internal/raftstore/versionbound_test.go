package raftstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The bound holds only at the applied index it was recorded at; a new
// range starts with a known, zero bound; merging with an unknown bound
// leaves it unknown.
func TestVersionBoundState(t *testing.T) {
	ts := func(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }
	if b := versionBoundOf(nil); !b.known || !b.ts.IsZero() {
		t.Fatalf("new range: %+v", b)
	}
	st := &tidekvpb.ReplicaState{AppliedIndex: 7}
	if b := versionBoundOf(st); b.known {
		t.Fatalf("a state without a bound: %+v", b)
	}
	recordVersionBound(st, versionBound{ts: ts(40), known: true})
	if b := versionBoundOf(st); !b.known || b.ts != ts(40) {
		t.Fatalf("recorded at 7: %+v", b)
	}
	// A binary that does not keep the bound applies more entries.
	st.AppliedIndex = 9
	if b := versionBoundOf(st); b.known {
		t.Fatalf("the bound survived entries it did not see: %+v", b)
	}
	recordVersionBound(st, versionBound{})
	if st.GetVersionBound() != nil || st.GetVersionBoundIndex() != 0 {
		t.Fatalf("an unknown bound recorded as %v at %d", st.GetVersionBound(), st.GetVersionBoundIndex())
	}

	known := versionBound{ts: ts(50), known: true}
	if !known.below(ts(51)) || known.below(ts(50)) || (versionBound{}).below(ts(1)) {
		t.Fatal("below: a bound is below timestamps above it only, and an unknown one below none")
	}
	if m := known.merged(versionBound{ts: ts(80), known: true}); !m.known || m.ts != ts(80) {
		t.Fatalf("merged known bounds: %+v", m)
	}
	if m := known.merged(versionBound{ts: ts(10)}); m.known {
		t.Fatalf("merged with an unknown bound: %+v", m)
	}
}

// countingEngine counts the iterators apply opens: a versioned point
// read is one.
type countingEngine struct {
	storage.Engine
	iters atomic.Int64
}

func (e *countingEngine) NewIter(lo, hi []byte) (storage.Iterator, error) {
	e.iters.Add(1)
	return e.Engine.NewIter(lo, hi)
}

// A put above the bound reads nothing and raises the bound; a put below
// it reads its key and lands above the newest version (too old); a delete
// reads whatever the bound; with the bound unknown every put reads.
func TestApplySkipsReadAboveVersionBound(t *testing.T) {
	eng := &countingEngine{Engine: storage.NewMem()}
	r := bareReplica(eng, "", "", true)
	r.mu.versionBound = versionBound{known: true}
	apply := func(wall int64, ops ...*tidekvpb.LogWrite) int64 {
		t.Helper()
		before := eng.iters.Load()
		ab := newApplyBatch(eng)
		if res := r.applyWritesLocked(ab, at(wall, &tidekvpb.RaftCommand{Writes: ops})); res.err != nil {
			t.Fatal(res.err)
		}
		if err := ab.commit(); err != nil {
			t.Fatal(err)
		}
		return eng.iters.Load() - before
	}
	newest := func(key string) hlc.Timestamp {
		t.Helper()
		v, err := mvcc.Get(eng, keys.VersionedKey([]byte(key)), hlc.MaxTimestamp)
		if err != nil {
			t.Fatal(err)
		}
		return v.Timestamp
	}
	if n := apply(100, putOp("a", "1"), putOp("b", "1")); n != 0 {
		t.Fatalf("puts above the bound read %d times", n)
	}
	if got := r.mu.versionBound.ts; got != (hlc.Timestamp{WallTime: 100}) {
		t.Fatalf("bound after puts at 100: %s", got)
	}
	if n := apply(50, putOp("a", "2")); n != 1 {
		t.Fatalf("a put below the bound read %d times, want 1", n)
	}
	if got, want := newest("a"), (hlc.Timestamp{WallTime: 100, Logical: 1}); got != want {
		t.Fatalf("a too-old put landed at %s, want %s", got, want)
	}
	if n := apply(200, delOp("b")); n != 1 {
		t.Fatalf("a delete read %d times, want 1", n)
	}
	r.mu.versionBound = versionBound{}
	if n := apply(300, putOp("a", "3")); n != 1 {
		t.Fatalf("a put with the bound unknown read %d times, want 1", n)
	}
}

// Every way a version can arrive at a range raises its bound on every
// replica, checked right after each one, with each arrival's version the
// newest of the range so that an arrival that did not raise the bound
// leaves it below a version: migration of unversioned data, a write, a
// transaction's intent, its resolution at a later commit timestamp, a
// one-phase commit, a split (both halves), a write to the right half then
// a merge into the left (the right's versions are the newer), a snapshot
// to a new node, and a restart. (A restore writes through the client, so
// it is the write path; an ingest is a snapshot's.)
func TestVersionBoundRaisedOnEveryArrival(t *testing.T) {
	tc := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := func(arrival string) {
		t.Helper()
		t.Logf("after %s", arrival)
		tc.checkVersionBounds(t)
	}
	tc.put("a", "unversioned")
	tc.migrate(t, testRangeID)
	check("the migration")
	tc.put("b", "1")
	tc.put("x", "1")
	check("writes")

	r := tc.leader(testRangeID)
	ref := &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("c")}
	wrote, err := r.WriteIntents(ctx, ref, r.store.hlc.Now(), []*tidekvpb.WriteOp{{Key: []byte("c"), Value: []byte("1")}})
	if err != nil {
		t.Fatal(err)
	}
	check("an intent")
	// Committed above its intent: the resolved version is the newest.
	commitTS := hlc.Timestamp{WallTime: wrote.WallTime + int64(time.Millisecond)}
	if err := tc.leader(testRangeID).ResolveIntents(ctx, ref, [][]byte{[]byte("c")}, tidekvpb.TxnStatus_TXN_COMMITTED, commitTS); err != nil {
		t.Fatal(err)
	}
	check("a resolution")
	for tc.leader(testRangeID).store.hlc.Now().Less(commitTS) {
		time.Sleep(time.Millisecond)
	}
	r = tc.leader(testRangeID)
	if _, err := r.CommitOnePhase(ctx, []byte("U"), r.store.hlc.Now(), nil, nil, []*tidekvpb.WriteOp{{Key: []byte("d"), Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	check("a one-phase commit")

	tc.splitAt(t, "m", 3)
	check("a split")
	for i := range 3 {
		if _, err := tc.leader(3).Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("y"), Value: fmt.Appendf(nil, "%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	check("writes to the right half")
	frozen := tc.freezeEverywhere(t, 3, testRangeID)
	if _, err := tc.leader(testRangeID).Merge(ctx, frozen); err != nil {
		t.Fatal(err)
	}
	check("a merge")

	n4 := tc.addNode()
	if _, err := tc.leader(testRangeID).ChangeReplicas(ctx, n4, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		r := tc.stores[n4].GetReplica(testRangeID)
		return r != nil && r.SnapshotsApplied() > 0
	})
	check("a snapshot")
	tc.put("z", "1")
	tc.crash(2)
	tc.restart(2)
	check("a restart")
}

// checkVersionBounds waits until every replica of every range has
// applied what its leader has, then checks its bound against the versions
// on its node.
func (tc *testCluster) checkVersionBounds(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		problems := tc.versionBoundProblems(t)
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("version bounds:\n%s", strings.Join(problems, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tc *testCluster) versionBoundProblems(t *testing.T) []string {
	var problems []string
	for _, id := range tc.nodes {
		s := tc.stores[id]
		if s == nil {
			continue
		}
		for _, r := range s.Replicas() {
			d := r.Desc()
			if d == nil || r.rangeID == keys.MetaRangeID {
				continue
			}
			r.mu.Lock()
			b := r.mu.versionBound
			r.mu.Unlock()
			newest := newestVersion(t, tc.engines[id], d)
			switch {
			case !b.known:
				problems = append(problems, fmt.Sprintf("node %d range %d: bound unknown", id, r.rangeID))
			case !newest.Less(b.ts) && newest != b.ts:
				problems = append(problems, fmt.Sprintf("node %d range %d: bound %s below a version at %s", id, r.rangeID, b.ts, newest))
			}
		}
	}
	return problems
}

// newestVersion is the highest timestamp among the versions in d's span.
func newestVersion(t *testing.T, eng storage.Reader, d *tidekvpb.RangeDescriptor) hlc.Timestamp {
	t.Helper()
	newest, err := newestVersionIn(eng, d.GetStartKey(), d.GetEndKey())
	if err != nil {
		t.Fatal(err)
	}
	return newest
}

// BenchmarkApplyOverwrites applies commands of one put each over 100,000
// existing keys of 100 bytes (in SSTs, Pebble with the production
// options), with the version bound known (no read per put) and unknown
// (a point read per put, as before the bound): the apply cost a write
// pays on every replica.
func BenchmarkApplyOverwrites(b *testing.B) {
	const n = 100_000
	val := make([]byte, 100)
	for _, known := range []bool{true, false} {
		b.Run(fmt.Sprintf("bound-known=%v", known), func(b *testing.B) {
			eng := loadPebble(b, func(w storage.Writer) error {
				for i := range n {
					if err := mvcc.Put(w, keys.VersionedKey(fmt.Appendf(nil, "user%011d", i)), hlc.Timestamp{WallTime: 1}, val); err != nil {
						return err
					}
				}
				return nil
			})
			defer eng.Close()
			r := bareReplica(eng, "", "", true)
			r.mu.versionBound = versionBound{ts: hlc.Timestamp{WallTime: 1}, known: known}
			cmds := make([]*tidekvpb.RaftCommand, 1024)
			for i := range cmds {
				k := fmt.Appendf(nil, "user%011d", (i*7919)%n)
				cmds[i] = &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: k, Value: val}}}
			}
			b.ResetTimer()
			for i := range b.N {
				ab := newApplyBatch(eng)
				if res := r.applyWritesLocked(ab, at(int64(i+2), cmds[i%len(cmds)])); res.err != nil {
					b.Fatal(res.err)
				}
				if err := ab.commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// entryOf is a normal log entry at index carrying cmd.
func entryOf(t *testing.T, index uint64, cmd *tidekvpb.RaftCommand) *raftpb.Entry {
	t.Helper()
	data, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &raftpb.Entry{Type: raftpb.EntryNormal.Enum(), Index: new(index), Term: new(uint64(1)), Data: data}
}

// persistedVersionBound is the bound range id's persisted state holds.
func persistedVersionBound(t *testing.T, eng storage.Reader, id uint64) versionBound {
	t.Helper()
	st, err := loadReplicaState(eng, id)
	if err != nil || st == nil {
		t.Fatalf("range %d's state: %v, %v", id, st, err)
	}
	return versionBoundOf(st)
}

// A split applied in the same round as a write before it: both halves
// start with a known bound at or above that write, though the round's
// end (where the bound is otherwise persisted) comes after the split.
func TestVersionBoundSurvivesSplitInRound(t *testing.T) {
	eng := storage.NewMem()
	r := bareReplica(eng, "", "", true)
	r.mu.state.AppliedIndex = 10
	r.mu.versionBound = versionBound{ts: hlc.Timestamp{WallTime: 100}, known: true}
	r.saveVersionBoundLocked()
	ab := newApplyBatch(eng)
	r.applyCommittedLocked(ab, []*raftpb.Entry{
		entryOf(t, 11, at(500, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("x", "1")}})),
		entryOf(t, 12, &tidekvpb.RaftCommand{Split: &tidekvpb.SplitCommand{SplitKey: []byte("m"), NewRangeId: 3}}),
	})
	if err := ab.commit(); err != nil {
		t.Fatal(err)
	}
	written := hlc.Timestamp{WallTime: 500}
	for _, id := range []uint64{2, 3} {
		if b := persistedVersionBound(t, eng, id); !b.known || b.ts.Less(written) {
			t.Errorf("range %d starts with bound %+v, want known and at or above the write at %s", id, b, written)
		}
	}
	if b := r.mu.versionBound; !b.known || b.ts.Less(written) {
		t.Errorf("the left half's bound in memory: %+v", b)
	}
}

// An apply that flushes in the middle of a round (an intent write must be
// readable by the entries after it) persists the bound with the writes it
// flushes: a crash before the round's end must not find those writes
// under a bound that is known and below them.
func TestVersionBoundPersistedWithMidRoundFlush(t *testing.T) {
	eng := storage.NewMem()
	r := bareReplica(eng, "", "", true)
	r.mu.state.AppliedIndex = 10
	r.mu.versionBound = versionBound{ts: hlc.Timestamp{WallTime: 100}, known: true}
	r.saveVersionBoundLocked()
	ab := newApplyBatch(eng)
	r.applyCommittedLocked(ab, []*raftpb.Entry{entryOf(t, 11, at(500, &tidekvpb.RaftCommand{Txn: &tidekvpb.TxnCommand{
		Op: tidekvpb.TxnCommand_WRITE_INTENTS, Txn: &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("k")}, Writes: []*tidekvpb.LogWrite{putOp("k", "1")}}}))})
	// The crash: the round's batch is never committed; what the flush
	// wrote is on disk.
	newest := newestVersion(t, eng, r.mu.state.GetDesc())
	if newest.Less(hlc.Timestamp{WallTime: 500}) {
		t.Fatalf("the flush wrote no intent (newest version %s)", newest)
	}
	if b := persistedVersionBound(t, eng, 2); b.known && b.ts.Less(newest) {
		t.Fatalf("after a crash mid-round the bound is %s and known, below the flushed intent at %s", b.ts, newest)
	}
}

// A bound left unknown (here as a binary that does not keep it leaves
// it: state without it, on every node) is known again after a GC pass
// of several chunks, at or above every version, including those written
// before it went unknown.
func TestVersionBoundReestablishedByGC(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.GCChunkVersions = 2 })
	tc.migrate(t, testRangeID)
	for i := range 4 {
		for _, k := range []string{"a", "f", "k", "p", "u"} {
			tc.put(k, fmt.Sprint(i))
		}
	}
	// A transaction's record lies among the versions (beside its anchor's)
	// and is no version: the scan passes over it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tc.leader(testRangeID).HeartbeatTxn(ctx, &tidekvpb.TxnRef{Id: []byte("T"), Anchor: []byte("k")}, false); err != nil {
		t.Fatal(err)
	}
	tc.checkVersionBounds(t)
	for _, id := range tc.nodes {
		tc.crash(id)
		st, err := loadReplicaState(tc.engines[id], testRangeID)
		if err != nil {
			t.Fatal(err)
		}
		recordVersionBound(st, versionBound{})
		b := tc.engines[id].NewBatch()
		if err := putProto(b, keys.ReplicaStateKey(testRangeID), st); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		b.Close()
		tc.restart(id)
	}
	for _, id := range tc.nodes {
		r := tc.stores[id].GetReplica(testRangeID)
		r.mu.Lock()
		b := r.mu.versionBound
		r.mu.Unlock()
		if b.known {
			t.Fatalf("node %d: bound %+v known after its state lost it", id, b)
		}
	}
	l := tc.leader(testRangeID)
	if res := tc.gcAt(t, testRangeID, l.store.hlc.Now()); res.Chunks < 2 {
		t.Fatalf("the GC pass ran %d chunks, want several", res.Chunks)
	}
	tc.checkVersionBounds(t)
}

// The scan makes a bound known only over one pass of consecutive chunks
// from the range's start to its end with no snapshot in between: a chunk
// that skips keys, or data replaced under the scan, leaves it unknown.
func TestVersionBoundScanNeedsWholePass(t *testing.T) {
	eng := storage.NewMem()
	put := func(k string, wall int64) {
		t.Helper()
		b := eng.NewBatch()
		defer b.Close()
		if err := mvcc.Put(b, keys.VersionedKey([]byte(k)), hlc.Timestamp{WallTime: wall}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 100)
	put("m", 300)
	put("x", 200)
	r := bareReplica(eng, "", "", true)
	r.mu.state.AppliedIndex = 10
	r.loadVersionBoundLocked()
	chunk := func(start, next string) versionBound {
		var n []byte
		if next != "" {
			n = []byte(next)
		}
		r.scanChunkForVersionBoundLocked(eng, []byte(start), n)
		return r.mu.versionBound
	}
	if b := chunk("", "m"); b.known {
		t.Fatalf("known after the first chunk: %+v", b)
	}
	if b := chunk("q", ""); b.known {
		t.Fatalf("known after a pass that skipped [m, q): %+v", b)
	}
	chunk("", "m")
	put("c", 900) // a snapshot replaces the data under the scan
	r.loadVersionBoundLocked()
	if b := chunk("m", ""); b.known {
		t.Fatalf("known after a pass across a snapshot: %+v", b)
	}
	chunk("", "m")
	if b := chunk("m", ""); !b.known || b.ts != (hlc.Timestamp{WallTime: 900}) {
		t.Fatalf("after a whole pass: %+v, want known at 900", b)
	}
}
