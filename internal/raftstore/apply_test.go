package raftstore

import (
	"errors"
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
	return r
}

func putOp(k, v string) *tidekvpb.WriteOp { return &tidekvpb.WriteOp{Key: []byte(k), Value: []byte(v)} }
func delOp(k string) *tidekvpb.WriteOp {
	return &tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_DELETE, Key: []byte(k)}
}

// TestApplyCommandsSeeEarlierEntries: several entries applied in one round
// share a batch; each must evaluate against the effects of the ones before.
func TestApplyCommandsSeeEarlierEntries(t *testing.T) {
	eng := storage.NewMem()
	r := bareReplica("a", "m")
	ab := newApplyBatch(eng)
	dk := func(k string) string { return string(keys.DataKey(2, []byte(k))) }

	if res := r.applyWritesLocked(ab, []*tidekvpb.WriteOp{putOp("b", "1"), putOp("c", "1")}); res.err != nil {
		t.Fatal(res.err)
	}
	// A delete of a key written earlier in the round reports it existed;
	// within one command, a put then delete of the same key too.
	if res := r.applyWritesLocked(ab, []*tidekvpb.WriteOp{delOp("b")}); res.err != nil || !res.deleted {
		t.Fatalf("delete of b written this round: %+v", res)
	}
	if res := r.applyWritesLocked(ab, []*tidekvpb.WriteOp{delOp("b")}); res.deleted {
		t.Fatal("second delete of b reports it existed")
	}
	if res := r.applyWritesLocked(ab, []*tidekvpb.WriteOp{putOp("d", "1"), delOp("d")}); !res.deleted {
		t.Fatal("put+delete in one command: delete did not see the put")
	}
	// CAS sees the round's writes and deletes.
	cas := func(key string, exists bool, expect, newV string) *tidekvpb.CompareAndSetResponse {
		t.Helper()
		res := r.applyCASLocked(ab, &tidekvpb.CompareAndSetRequest{Key: []byte(key), ExpectExists: exists,
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
	res := r.applyWritesLocked(ab, []*tidekvpb.WriteOp{putOp("e", "1"), putOp("z", "1")})
	var km *KeyMismatchError
	if !errors.As(res.err, &km) || string(km.Key) != "z" {
		t.Fatalf("write outside the range: %v", res.err)
	}
	if res := r.applyCASLocked(ab, &tidekvpb.CompareAndSetRequest{Key: []byte("z"), NewValue: []byte("1")}); !errors.As(res.err, &km) {
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
