package raftstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
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
// evaluate commands against its descriptor.
func bareReplica(start, end string) *Replica {
	r := &Replica{rangeID: 2}
	var e []byte
	if end != "" {
		e = []byte(end)
	}
	r.mu.state = &tidekvpb.ReplicaState{Desc: &tidekvpb.RangeDescriptor{RangeId: 2, StartKey: []byte(start), EndKey: e}}
	r.mu.proposals = map[uint64]*proposal{}
	return r
}

// proposed makes cmd this replica's own proposal, as the leaseholder's
// would be: only then does its apply compute what the proposer is told.
func proposed(r *Replica, cmd *tidekvpb.RaftCommand) *tidekvpb.RaftCommand {
	cmd.ProposalId = uint64(len(r.mu.proposals)) + 1
	r.mu.proposals[cmd.ProposalId] = &proposal{id: cmd.ProposalId, done: make(chan applyResult, 1)}
	return cmd
}

// TestApplyGuardedWrite: a guarded write applies only while its key is
// absent or holds the guard's value, clears the span when the key is
// absent (including keys written earlier in the round), and reports which
// keys existed.
func TestApplyGuardedWrite(t *testing.T) {
	eng := storage.NewMem()
	r := bareReplica("a", "m")
	ab := newApplyBatch(eng)
	guard := &tidekvpb.LogGuard{Key: []byte("h"), Value: []byte("H"), ClearStart: []byte("h/"), ClearEnd: []byte("h0")}
	write := func(ops ...*tidekvpb.LogWrite) *tidekvpb.WriteResponse {
		t.Helper()
		res := r.applyWritesLocked(ab, proposed(r, &tidekvpb.RaftCommand{Writes: ops, WriteGuard: guard, WantExisted: true}))
		if res.err != nil {
			t.Fatal(res.err)
		}
		return res.write
	}
	// Stale members: one committed, one written earlier in this round.
	b := eng.NewBatch()
	if err := b.Set(keys.DataKey(2, []byte("h/old")), []byte("x")); err != nil || b.Commit(false) != nil {
		t.Fatal(err)
	}
	if res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h/f1", "stale"), putOp("h0", "neighbour")}}); res.err != nil {
		t.Fatal(res.err)
	}
	w := write(putOp("h", "H"), putOp("h/f1", "v1"), putOp("h/f2", "v2"))
	if w.GetGuardFailed() || w.GetGuardExisted() || fmt.Sprint(w.GetExisted()) != "[false false false]" {
		t.Fatalf("creating the collection: %v", w)
	}
	if _, found := ab.mustGet(r, keys.DataKey(2, []byte("h/old"))); found {
		t.Fatal("a stale member survived the collection's creation")
	}
	if v, _ := ab.mustGet(r, keys.DataKey(2, []byte("h0"))); string(v) != "neighbour" {
		t.Fatalf("the key at the span's end was touched: %q", v)
	}
	w = write(putOp("h", "H"), putOp("h/f2", "w2"), putOp("h/f3", "v3"))
	if w.GetGuardFailed() || !w.GetGuardExisted() || fmt.Sprint(w.GetExisted()) != "[true true false]" {
		t.Fatalf("updating the collection: %v", w)
	}
	// A replica no proposer waits on applies the same writes without
	// reading what existed: that answers nobody.
	if res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h", "H"), putOp("h/f5", "v5")}, WriteGuard: guard, WantExisted: true}); res.err != nil || len(res.write.GetExisted()) != 0 {
		t.Fatalf("a follower's apply: %+v", res)
	}
	if v, _ := ab.mustGet(r, keys.DataKey(2, []byte("h/f5"))); string(v) != "v5" {
		t.Fatalf("a follower's apply did not write: h/f5 = %q", v)
	}
	if v, _ := ab.mustGet(r, keys.DataKey(2, []byte("h/f1"))); string(v) != "v1" {
		t.Fatalf("an update cleared a member: h/f1 = %q", v)
	}
	// The key holds something else: nothing is written.
	if res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h", "string")}}); res.err != nil {
		t.Fatal(res.err)
	}
	w = write(putOp("h", "H"), putOp("h/f4", "v4"))
	if !w.GetGuardFailed() || string(w.GetGuardCurrent()) != "string" || len(w.GetExisted()) != 0 {
		t.Fatalf("a guard on a key of another type: %v", w)
	}
	if _, found := ab.mustGet(r, keys.DataKey(2, []byte("h/f4"))); found {
		t.Fatal("a write whose guard failed was applied")
	}
	// A span past the range's end is refused.
	bad := &tidekvpb.LogGuard{Key: []byte("h"), ClearStart: []byte("h/"), ClearEnd: []byte("z")}
	if res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("h", "H")}, WriteGuard: bad}); res.err == nil {
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
	eng := storage.NewMem()
	r := bareReplica("a", "m")
	ab := newApplyBatch(eng)
	dk := func(k string) string { return string(keys.DataKey(2, []byte(k))) }

	if res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("b", "1"), putOp("c", "1")}}); res.err != nil {
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
		res := r.applyCASLocked(ab, &tidekvpb.LogCompareAndSet{Key: []byte(key), ExpectExists: exists,
			ExpectedValue: []byte(expect), NewValue: []byte(newV)})
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
	res := r.applyWritesLocked(ab, &tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{putOp("e", "1"), putOp("z", "1")}})
	var km *KeyMismatchError
	if !errors.As(res.err, &km) || string(km.Key) != "z" {
		t.Fatalf("write outside the range: %v", res.err)
	}
	if res := r.applyCASLocked(ab, &tidekvpb.LogCompareAndSet{Key: []byte("z"), NewValue: []byte("1")}); !errors.As(res.err, &km) {
		t.Fatalf("cas outside the range: %v", res.err)
	}
	if err := ab.commit(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{dk("b"): "new", dk("c"): "2"}
	got := map[string]string{}
	lo, hi := keys.DataSpan(2, nil, nil)
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		got[string(it.Key())] = string(it.Value())
	}
	it.Close()
	if len(got) != len(want) || got[dk("b")] != "new" || got[dk("c")] != "2" {
		t.Fatalf("engine holds %q, want %q", got, want)
	}
}
