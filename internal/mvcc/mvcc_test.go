package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

// commitVersion commits a version: a nil value is a tombstone.
func commitVersion(t testing.TB, e storage.Engine, key string, ts hlc.Timestamp, value []byte) {
	t.Helper()
	b := e.NewBatch()
	defer b.Close()
	var err error
	if value == nil {
		err = Delete(b, []byte(key), ts)
	} else {
		err = Put(b, []byte(key), ts, value)
	}
	if err == nil {
		err = b.Commit(false)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func mustGet(t *testing.T, r storage.Reader, key string, ts hlc.Timestamp) Version {
	t.Helper()
	v, err := Get(r, []byte(key), ts)
	if err != nil {
		t.Fatalf("Get(%q, %s): %v", key, ts, err)
	}
	return v
}

func TestReadsAtTimestamps(t *testing.T) {
	e := storage.NewMem()
	commitVersion(t, e, "k", at(10), []byte("one"))
	commitVersion(t, e, "k", at(20), nil)
	commitVersion(t, e, "k", at(30), []byte("three"))
	commitVersion(t, e, "k\x00", at(15), []byte("next key"))
	commitVersion(t, e, "j", at(40), []byte{}) // an empty value is a value
	for _, tc := range []struct {
		ts        hlc.Timestamp
		want      string // "" with found false: nothing
		found     bool
		versionTS hlc.Timestamp
	}{
		{at(5), "", false, hlc.Timestamp{}},
		{at(10), "one", true, at(10)},
		{hlc.Timestamp{WallTime: 19, Logical: 9}, "one", true, at(10)},
		{at(20), "", false, at(20)},
		{at(29), "", false, at(20)},
		{at(30), "three", true, at(30)},
		{hlc.MaxTimestamp, "three", true, at(30)},
	} {
		v := mustGet(t, e, "k", tc.ts)
		if v.Found() != tc.found || string(v.Value) != tc.want || v.Timestamp != tc.versionTS || v.Tombstone != (tc.versionTS == at(20)) {
			t.Errorf("Get(k, %s) = %+v, want %q found %v at %s", tc.ts, v, tc.want, tc.found, tc.versionTS)
		}
	}
	if v := mustGet(t, e, "j", at(40)); !v.Found() || v.Value == nil || len(v.Value) != 0 {
		t.Errorf("Get of an empty value = %+v, want found and empty", v)
	}
	kvs, resume, err := Scan(e, nil, nil, at(25), 100, 1<<20)
	if err != nil || resume != nil {
		t.Fatal(err, resume)
	}
	// At 25: j is not yet written, k is deleted, k\x00 holds its value.
	if got := fmtKVs(kvs); got != fmt.Sprintf("  %q@%s = %q\n", "k\x00", at(15), "next key") {
		t.Errorf("Scan at 25 =\n%s", got)
	}
}

func TestScanResumesAtTheNextKey(t *testing.T) {
	e := storage.NewMem()
	for _, k := range []string{"a", "b", "c", "d"} {
		commitVersion(t, e, k, at(1), []byte("vv"))
	}
	commitVersion(t, e, "d", at(2), nil)
	kvs, resume, err := Scan(e, []byte("a"), nil, at(5), 2, 1<<20)
	if err != nil || len(kvs) != 2 || string(resume) != "c" {
		t.Fatalf("Scan limit 2 = %d keys, resume %q, %v; want 2 keys, resume c", len(kvs), resume, err)
	}
	// The byte budget: "a"+"vv" is 3 bytes, so a budget of 4 takes a
	// second key and stops before the third.
	kvs, resume, err = Scan(e, []byte("a"), nil, at(5), 10, 4)
	if err != nil || len(kvs) != 2 || string(resume) != "c" {
		t.Fatalf("Scan of 4 bytes = %d keys, resume %q, %v; want 2 keys, resume c", len(kvs), resume, err)
	}
	// A span ending before d: done, no resume.
	kvs, resume, err = Scan(e, []byte("c"), []byte("d"), at(5), 10, 1<<20)
	if err != nil || len(kvs) != 1 || resume != nil {
		t.Fatalf("Scan [c, d) = %d keys, resume %q, %v", len(kvs), resume, err)
	}
	// The key and value of a result are separate slices.
	kvs[0].Key = append(kvs[0].Key, 'x')
	if string(kvs[0].Value) != "vv" {
		t.Fatalf("appending to a returned key changed its value to %q", kvs[0].Value)
	}
}

func TestBadInput(t *testing.T) {
	e := storage.NewMem()
	b := e.NewBatch()
	defer b.Close()
	for name, err := range map[string]error{
		"put at zero":    Put(b, []byte("k"), hlc.Timestamp{}, []byte("v")),
		"delete at zero": Delete(b, []byte("k"), hlc.Timestamp{}),
		"scan limit 0":   second(Scan(e, nil, nil, at(1), 0, 10)),
		"scan 0 bytes":   second(Scan(e, nil, nil, at(1), 10, 0)),
		"gc budget 0":    third(GC(e, b, nil, nil, at(1), 0)),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	if !b.Empty() {
		t.Error("refused writes reached the batch")
	}
	// Data this binary cannot read is an error, not a guess.
	commitVersion(t, e, "k", at(1), []byte("v"))
	corrupt := e.NewBatch()
	defer corrupt.Close()
	if err := corrupt.Set(AppendKey(nil, []byte("k"), at(2)), []byte{9, 0, 'x'}); err != nil {
		t.Fatal(err)
	}
	if err := corrupt.Set([]byte("z-not-versioned"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := corrupt.Commit(false); err != nil {
		t.Fatal(err)
	}
	if _, err := Get(e, []byte("k"), at(5)); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("Get of a format-9 value: err = %v", err)
	}
	if _, _, err := Scan(e, nil, nil, at(1), 10, 100); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Scan over an unversioned key: err = %v", err)
	}
	if _, err := ComputeStats(e, nil, []byte("y")); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("ComputeStats over a format-9 value: err = %v", err)
	}
}

func second[A, B any](_ A, _ B, err error) error { return err }
func third[A, B any](_ A, _ B, err error) error  { return err }

// A tombstone with many versions under it: GC in small calls removes the
// older versions first and the tombstone last, so between calls a read at
// the safe point never sees an old value come back.
func TestGCRemovesATombstoneLast(t *testing.T) {
	e := storage.NewMem()
	for i := range 25 {
		commitVersion(t, e, "k", at(int64(i+1)), []byte(fmt.Sprintf("v%d", i)))
	}
	commitVersion(t, e, "k", at(30), nil)
	commitVersion(t, e, "k", at(40), []byte("above"))
	commitVersion(t, e, "m", at(1), []byte("m1"))
	sp := at(35)
	calls := 0
	for from := []byte(nil); ; calls++ {
		b := e.NewBatch()
		resume, st, err := GC(e, b, from, nil, sp, 10)
		if err != nil {
			t.Fatal(err)
		}
		if st.Versions > 10 {
			t.Fatalf("call %d removed %d versions with a budget of 10", calls, st.Versions)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		if v := mustGet(t, e, "k", sp); v.Found() {
			t.Fatalf("after call %d a read at the safe point finds %q", calls, v.Value)
		}
		if resume == nil {
			break
		}
		if string(resume) != "k" {
			t.Fatalf("call %d resumes at %q, want mid-way through k", calls, resume)
		}
		from = resume
	}
	if calls < 2 {
		t.Fatalf("GC of 26 versions with a budget of 10 took %d calls", calls+1)
	}
	st, err := ComputeStats(e, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Left: k@40 and m@1.
	if st.Versions != 2 || st.LiveKeys != 2 {
		t.Fatalf("after GC: %+v, want k@40 and m@1 only", st)
	}
	if v := mustGet(t, e, "k", at(40)); string(v.Value) != "above" {
		t.Fatalf("Get(k, 40) = %+v", v)
	}
}

// Versions above the safe point are passed by a seek: a key with a
// thousand of them costs one call of a small budget.
// A value that expired by the safe point's wall time is as invisible to
// reads at or above it as a tombstone: GC removes it with what it hides.
// One that expires later stays.
func TestGCRemovesExpiredValues(t *testing.T) {
	e := storage.NewMem()
	b := e.NewBatch()
	for _, v := range []struct {
		key     string
		ts, exp int64
	}{{"gone", 10, 0}, {"gone", 20, 30}, {"kept", 10, 0}, {"kept", 20, 50}} {
		if err := PutExpiring(b, []byte(v.key), at(v.ts), []byte("v"), v.exp); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	gcb := e.NewBatch()
	defer gcb.Close()
	if _, st, err := GC(e, gcb, nil, nil, at(40), 100); err != nil || st.Versions != 3 {
		t.Fatalf("GC at 40: %+v, %v; want gone@20, gone@10 and kept@10 removed", st, err)
	}
	if err := gcb.Commit(false); err != nil {
		t.Fatal(err)
	}
	st, err := ComputeStats(e, nil, nil)
	if err != nil || st.Versions != 1 {
		t.Fatalf("after GC: %+v, %v; want kept@20 alone", st, err)
	}
	if v := mustGet(t, e, "kept", at(45)); !v.LiveAt(45) {
		t.Fatal("kept, expiring at 50, is gone at 45")
	}
	// Sizes count it live until it is removed; GC's view counts it as
	// garbage once expired.
	if st, err := ComputeStatsAt(e, nil, nil, 50); err != nil || st.LiveKeys != 0 || st.Versions != 1 {
		t.Fatalf("stats at 50: %+v, %v; want kept@20 stored but not live", st, err)
	}
	if st, err := ComputeStats(e, nil, nil); err != nil || st.LiveKeys != 1 {
		t.Fatalf("stats for sizes: %+v, %v; want kept@20 live", st, err)
	}
}

func TestGCSeeksPastVersionsAboveTheSafePoint(t *testing.T) {
	e := storage.NewMem()
	b := e.NewBatch()
	for i := range 1000 {
		if err := Put(b, []byte("k"), at(int64(100+i)), []byte("new")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := Put(b, []byte("k"), at(int64(10+i)), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	gcb := e.NewBatch()
	defer gcb.Close()
	resume, st, err := GC(e, gcb, nil, nil, at(50), 3)
	if err != nil || resume != nil || st.Versions != 1 || st.Keys != 1 {
		t.Fatalf("GC = resume %q, %+v, %v; want done in one call, one version removed", resume, st, err)
	}
}

func TestStats(t *testing.T) {
	e := storage.NewMem()
	commitVersion(t, e, "ab", at(1), []byte("123"))
	commitVersion(t, e, "ab", at(2), []byte("45"))
	commitVersion(t, e, "c", at(1), []byte("x"))
	commitVersion(t, e, "c", at(3), nil)
	st, err := ComputeStats(e, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Live: ab=45 (4 bytes). Total: engine keys of 2+14 and 1+14 bytes,
	// values with their 2-byte headers.
	want := Stats{LiveKeys: 1, LiveBytes: 4, Versions: 4, TotalBytes: 2*16 + 2*15 + (5 + 4 + 3 + 2)}
	if st != want {
		t.Fatalf("ComputeStats = %+v, want %+v", st, want)
	}
}

// The bytes' middle lies among b's versions: the split key is a key
// boundary next to it, with every version of the key on the right.
func TestSplitKeyIsAKeyBoundary(t *testing.T) {
	e := storage.NewMem()
	commitVersion(t, e, "a", at(1), []byte("a"))
	for i := range 500 {
		commitVersion(t, e, "b", at(int64(i+1)), []byte(strings.Repeat("b", 100)))
	}
	commitVersion(t, e, "c", at(1), []byte("c"))
	key, err := SplitKey(context.Background(), e, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(key) != "b" && string(key) != "c" {
		t.Fatalf("SplitKey = %q, want b or c", key)
	}
	lo, hi := EngineSpan(nil, key)
	it, err := e.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if k, _, _ := DecodeKey(it.Key()); bytes.Equal(k, key) {
			t.Fatalf("a version of the split key %q lies left of it", key)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}

	one := storage.NewMem()
	commitVersion(t, one, "only", at(1), []byte("x"))
	commitVersion(t, one, "only", at(2), []byte("y"))
	if _, err := SplitKey(context.Background(), one, nil, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("SplitKey of one key with two versions: err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SplitKey(ctx, e, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("SplitKey after cancel: err = %v", err)
	}
}

// TestGetAllocatesOnlyItsValue pins the point read's cost on Pebble, from
// the memtable and from an SST: the value's copy and nothing else; a miss
// allocates nothing.
func TestGetAllocatesOnlyItsValue(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	e := enginetest.Pebble.Open(t)
	for i := range 5 {
		commitVersion(t, e, "k", at(int64(10+i)), []byte("value"))
	}
	for _, flushed := range []bool{false, true} {
		if flushed {
			enginetest.Pebble.Flush(t, e)
		}
		for _, tc := range []struct {
			key    string
			ts     hlc.Timestamp
			allocs float64
		}{
			{"k", hlc.MaxTimestamp, 1},
			{"k", at(11), 1},
			{"k", at(1), 0},
			{"missing", hlc.MaxTimestamp, 0},
		} {
			mustGet(t, e, tc.key, tc.ts) // warm the pool and the block cache
			got := testing.AllocsPerRun(500, func() { mustGet(t, e, tc.key, tc.ts) })
			if got > tc.allocs {
				t.Errorf("flushed %v: Get(%q, %s) allocates %.1f times, want %.0f", flushed, tc.key, tc.ts, got, tc.allocs)
			}
		}
	}
}
