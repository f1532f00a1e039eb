package raftstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

func applyMustGet(t *testing.T, r interface {
	Get([]byte) ([]byte, bool, error)
}, key string) (string, bool) {
	t.Helper()
	v, ok, err := r.Get([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// abGet adapts applyBatch.get to the shape mustGet reads.
type abGet struct{ ab *applyBatch }

func (g abGet) Get(k []byte) ([]byte, bool, error) { return g.ab.get(k) }

func TestApplyBatchOverlay(t *testing.T) {
	eng := storage.NewMem()
	b := eng.NewBatch()
	for _, k := range []string{"gone", "kept"} {
		if err := b.Set([]byte(k), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()

	ab := newApplyBatch(eng)
	g := abGet{ab}
	// Reads fall through to the engine...
	if v, ok := applyMustGet(t, g, "kept"); !ok || v != "old" {
		t.Fatalf("kept = %q, %v", v, ok)
	}
	// ...and see the batch's own earlier writes and deletes, which the
	// engine does not see until commit.
	if err := ab.set([]byte("new"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := ab.set([]byte("new"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := ab.del([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	if err := ab.set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if err := ab.del([]byte("never")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, want string
		found     bool
	}{{"new", "v2", true}, {"gone", "", false}, {"empty", "", true}, {"never", "", false}, {"kept", "old", true}} {
		if v, ok := applyMustGet(t, g, c.key); ok != c.found || v != c.want {
			t.Errorf("batch view of %s = %q, %v; want %q, %v", c.key, v, ok, c.want, c.found)
		}
	}
	if _, ok := applyMustGet(t, eng, "new"); ok {
		t.Fatal("uncommitted write visible in the engine")
	}
	if _, ok := applyMustGet(t, eng, "gone"); !ok {
		t.Fatal("uncommitted delete visible in the engine")
	}

	// flush makes the writes visible to engine reads (iterators) and keeps
	// the batch usable, reading through to what it wrote.
	if err := ab.flush(); err != nil {
		t.Fatal(err)
	}
	if v, ok := applyMustGet(t, eng, "new"); !ok || v != "v2" {
		t.Fatalf("after flush: new = %q, %v", v, ok)
	}
	if v, ok := applyMustGet(t, g, "empty"); !ok || v != "" {
		t.Fatalf("after flush: empty = %q, %v", v, ok)
	}
	if err := ab.set([]byte("late"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := ab.del([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if _, ok := applyMustGet(t, g, "new"); ok {
		t.Fatal("delete after flush not seen by the batch")
	}
	if err := ab.commit(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, want string
		found     bool
	}{{"new", "", false}, {"gone", "", false}, {"empty", "", true}, {"kept", "old", true}, {"late", "x", true}} {
		if v, ok := applyMustGet(t, eng, c.key); ok != c.found || v != c.want {
			t.Errorf("engine after commit: %s = %q, %v; want %q, %v", c.key, v, ok, c.want, c.found)
		}
	}

	// Committing an empty batch is fine (rounds that applied nothing).
	if err := newApplyBatch(eng).commit(); err != nil {
		t.Fatal(err)
	}
}

// bareReplica is just enough of a replica for the apply functions that
// evaluate commands against its descriptor, with its data in the given
// layout.
func bareReplica(eng storage.Engine, start, end string, versioned bool) *Replica {
	// Reads judge expiry by the store's clock: one that reads 0 here.
	clock, err := hlc.NewClock(manualclock.New(time.Unix(0, 0)), time.Second)
	if err != nil {
		panic(err)
	}
	r := &Replica{rangeID: 2, store: &Store{eng: eng, hlc: clock}}
	var e []byte
	if end != "" {
		e = []byte(end)
	}
	r.mu.state = &tidekvpb.ReplicaState{Desc: &tidekvpb.RangeDescriptor{RangeId: 2, StartKey: []byte(start), EndKey: e}}
	if versioned {
		r.mu.state.Layout = tidekvpb.DataLayout_DATA_LAYOUT_MVCC
	}
	r.mu.proposals = map[uint64]*proposal{}
	return r
}

// inLayouts runs a test of apply once per data layout.
func inLayouts(t *testing.T, test func(t *testing.T, versioned bool)) {
	for _, versioned := range []bool{false, true} {
		t.Run(fmt.Sprintf("versioned=%v", versioned), func(t *testing.T) { test(t, versioned) })
	}
}

// stamped gives cmd the timestamp a leaseholder at log version 4 would:
// every command of a test the same one, so later writes of a key land
// just above earlier ones, as writes proposed before them but applied
// after do.
func stamped(cmd *tidekvpb.RaftCommand) *tidekvpb.RaftCommand {
	cmd.Timestamp = logTimestamp(hlc.Timestamp{WallTime: 100})
	return cmd
}

// proposed makes cmd this replica's own proposal, as the leaseholder's
// would be: only then does its apply compute what the proposer is told.
func proposed(r *Replica, cmd *tidekvpb.RaftCommand) *tidekvpb.RaftCommand {
	cmd.ProposalId = uint64(len(r.mu.proposals)) + 1
	r.mu.proposals[cmd.ProposalId] = &proposal{id: cmd.ProposalId, done: make(chan applyResult, 1)}
	return stamped(cmd)
}

// batchView reads key as the apply batch sees it in r's layout.
func batchView(t *testing.T, r *Replica, ab *applyBatch, key string) (string, bool) {
	t.Helper()
	data, err := r.dataLocked(ab, stamped(&tidekvpb.RaftCommand{}))
	if err != nil {
		t.Fatal(err)
	}
	v, found := data.get([]byte(key))
	return string(v), found
}

// TestApplyGuardedWrite: a guarded write applies only while its key is
// absent or holds the guard's value, clears the span when the key is
// absent (including keys written earlier in the round), and reports which
// keys existed.
func TestApplyGuardedWrite(t *testing.T) { inLayouts(t, testApplyGuardedWrite) }

func testApplyGuardedWrite(t *testing.T, versioned bool) {
	eng := storage.NewMem()
	r := bareReplica(eng, "a", "m", versioned)
	guard := &tidekvpb.LogGuard{Key: []byte("h"), Value: []byte("H"), ClearStart: []byte("h/"), ClearEnd: []byte("h0")}
	// Stale members: one committed, one written earlier in this round.
	ab := newApplyBatch(eng)
	if res := r.applyWritesLocked(ab, stamped(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h/old", "x")}})); res.err != nil || ab.commit() != nil {
		t.Fatal(res.err)
	}
	ab = newApplyBatch(eng)
	write := func(ops ...*tidekvpb.LogWrite) *tidekvpb.WriteResponse {
		t.Helper()
		res := r.applyWritesLocked(ab, proposed(r, &tidekvpb.RaftCommand{Writes: ops, WriteGuard: guard, WantExisted: true}))
		if res.err != nil {
			t.Fatal(res.err)
		}
		return res.write
	}
	if res := r.applyWritesLocked(ab, stamped(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h/f1", "stale"), putOp("h0", "neighbour")}})); res.err != nil {
		t.Fatal(res.err)
	}
	w := write(putOp("h", "H"), putOp("h/f1", "v1"), putOp("h/f2", "v2"))
	if w.GetGuardFailed() || w.GetGuardExisted() || fmt.Sprint(w.GetExisted()) != "[false false false]" {
		t.Fatalf("creating the collection: %v", w)
	}
	if _, found := batchView(t, r, ab, "h/old"); found {
		t.Fatal("a stale member survived the collection's creation")
	}
	if v, _ := batchView(t, r, ab, "h0"); v != "neighbour" {
		t.Fatalf("the key at the span's end was touched: %q", v)
	}
	w = write(putOp("h", "H"), putOp("h/f2", "w2"), putOp("h/f3", "v3"))
	if w.GetGuardFailed() || !w.GetGuardExisted() || fmt.Sprint(w.GetExisted()) != "[true true false]" {
		t.Fatalf("updating the collection: %v", w)
	}
	// A replica no proposer waits on applies the same writes without
	// reading what existed: that answers nobody.
	if res := r.applyWritesLocked(ab, stamped(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h", "H"), putOp("h/f5", "v5")}, WriteGuard: guard, WantExisted: true})); res.err != nil || len(res.write.GetExisted()) != 0 {
		t.Fatalf("a follower's apply: %+v", res)
	}
	if v, _ := batchView(t, r, ab, "h/f5"); v != "v5" {
		t.Fatalf("a follower's apply did not write: h/f5 = %q", v)
	}
	if v, _ := batchView(t, r, ab, "h/f1"); v != "v1" {
		t.Fatalf("an update cleared a member: h/f1 = %q", v)
	}
	// The key holds something else: nothing is written.
	if res := r.applyWritesLocked(ab, stamped(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h", "string")}})); res.err != nil {
		t.Fatal(res.err)
	}
	w = write(putOp("h", "H"), putOp("h/f4", "v4"))
	if !w.GetGuardFailed() || string(w.GetGuardCurrent()) != "string" || len(w.GetExisted()) != 0 {
		t.Fatalf("a guard on a key of another type: %v", w)
	}
	if _, found := batchView(t, r, ab, "h/f4"); found {
		t.Fatal("a write whose guard failed was applied")
	}
	// A span past the range's end is refused.
	bad := &tidekvpb.LogGuard{Key: []byte("h"), ClearStart: []byte("h/"), ClearEnd: []byte("z")}
	if res := r.applyWritesLocked(ab, stamped(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h", "H")}, WriteGuard: bad})); res.err == nil {
		t.Fatal("a clear span past the range's end was accepted")
	}
}

func putOp(k, v string) *tidekvpb.LogWrite {
	return &tidekvpb.LogWrite{Key: []byte(k), Value: []byte(v)}
}
func delOp(k string) *tidekvpb.LogWrite {
	return &tidekvpb.LogWrite{Delete: true, Key: []byte(k)}
}

// TestApplyCommandsSeeEarlierEntries: several entries applied in one round
// share a batch; each must evaluate against the effects of the ones before.
func TestApplyCommandsSeeEarlierEntries(t *testing.T) {
	inLayouts(t, testApplyCommandsSeeEarlierEntries)
}

func testApplyCommandsSeeEarlierEntries(t *testing.T, versioned bool) {
	eng := storage.NewMem()
	r := bareReplica(eng, "a", "m", versioned)
	ab := newApplyBatch(eng)

	if res := r.applyWritesLocked(ab, stamped(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("b", "1"), putOp("c", "1")}})); res.err != nil {
		t.Fatal(res.err)
	}
	// A delete of a key written earlier in the round reports it existed;
	// within one command, a put then delete of the same key too.
	if res := r.applyWritesLocked(ab, proposed(r, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{delOp("b")}})); res.err != nil || !res.deleted {
		t.Fatalf("delete of b written this round: %+v", res)
	}
	if res := r.applyWritesLocked(ab, proposed(r, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{delOp("b")}})); res.deleted {
		t.Fatal("second delete of b reports it existed")
	}
	if res := r.applyWritesLocked(ab, proposed(r, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("d", "1"), delOp("d")}})); !res.deleted {
		t.Fatal("put+delete in one command: delete did not see the put")
	}
	// CAS sees the round's writes and deletes.
	cas := func(key string, exists bool, expect, newV string) *tidekvpb.CompareAndSetResponse {
		t.Helper()
		res := r.applyCASLocked(ab, stamped(&tidekvpb.RaftCommand{Cas: &tidekvpb.LogCompareAndSet{Key: []byte(key), ExpectExists: exists,
			ExpectedValue: []byte(expect), NewValue: []byte(newV)}}))
		if res.err != nil {
			t.Fatal(res.err)
		}
		return res.cas
	}
	if c := cas("c", true, "1", "2"); !c.GetSucceeded() {
		t.Fatalf("cas on c written this round: %v", c)
	}
	if c := cas("c", true, "1", "3"); c.GetSucceeded() || string(c.GetCurrentValue()) != "2" {
		t.Fatalf("stale cas on c: %v", c)
	}
	if c := cas("b", false, "", "new"); !c.GetSucceeded() {
		t.Fatalf("create-if-absent on b deleted this round: %v", c)
	}

	// A command with any key outside the range applies none of its writes.
	res := r.applyWritesLocked(ab, stamped(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("e", "1"), putOp("z", "1")}}))
	var km *KeyMismatchError
	if !errors.As(res.err, &km) || string(km.Key) != "z" {
		t.Fatalf("write outside the range: %v", res.err)
	}
	if res := r.applyCASLocked(ab, stamped(&tidekvpb.RaftCommand{Cas: &tidekvpb.LogCompareAndSet{Key: []byte("z"), NewValue: []byte("1")}})); !errors.As(res.err, &km) {
		t.Fatalf("cas outside the range: %v", res.err)
	}
	if err := ab.commit(); err != nil {
		t.Fatal(err)
	}
	if got := scanAll(t, r); got != "b=new c=2" {
		t.Fatalf("engine holds %s, want b=new c=2", got)
	}
}

// scanAll renders the range's data in the engine as key=value pairs.
func scanAll(t *testing.T, r *Replica) string {
	t.Helper()
	scan := r.scanUnversioned
	if isMVCC(r.mu.state) {
		scan = r.scanVersioned
	}
	kvs, _, err := scan(r.mu.state.GetDesc().GetStartKey(), r.mu.state.GetDesc().GetEndKey(), 1000, 1<<20, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range kvs {
		out = append(out, fmt.Sprintf("%s=%s", kv.GetKey(), kv.GetValue()))
	}
	return strings.Join(out, " ")
}
