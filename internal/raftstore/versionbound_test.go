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

// Through migration, writes, a split, a merge, a snapshot to a new node
// and a restart, every replica's bound is known and at or above every
// version in its span, so no write it skips the read for can be too old.
func TestVersionBoundThroughSplitMergeSnapshotRestart(t *testing.T) {
	tc := newTestCluster(t, 3)
	tc.migrate(t, testRangeID)
	tc.put("a", "1")
	tc.put("x", "2")
	tc.checkVersionBounds(t)
	tc.splitAt(t, "m", 3)
	tc.checkVersionBounds(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 5 {
		if _, err := tc.leader(3).Write(ctx, []*tidekvpb.WriteOp{{Key: []byte("x"), Value: fmt.Appendf(nil, "%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	tc.checkVersionBounds(t)
	frozen := tc.freezeEverywhere(t, 3, testRangeID)
	if _, err := tc.leader(testRangeID).Merge(ctx, frozen); err != nil {
		t.Fatal(err)
	}
	tc.checkVersionBounds(t)

	n4 := tc.addNode()
	if _, err := tc.leader(testRangeID).ChangeReplicas(ctx, n4, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		r := tc.stores[n4].GetReplica(testRangeID)
		return r != nil && r.SnapshotsApplied() > 0
	})
	tc.checkVersionBounds(t)
	tc.crash(2)
	tc.restart(2)
	tc.checkVersionBounds(t)
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
	lo, hi := keys.VersionedSpan(d.GetStartKey(), d.GetEndKey())
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var newest hlc.Timestamp
	for ok := it.First(); ok; ok = it.Next() {
		_, ts, err := mvcc.DecodeKey(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		if newest.Less(ts) {
			newest = ts
		}
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
