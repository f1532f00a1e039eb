package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

func commit(t *testing.T, b storage.Batch, errs ...error) {
	t.Helper()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
}

// Intents read back as versions carrying their transaction; scans stop at
// them; records beside the versions are invisible to every reader of
// versions and lie within their anchor's span.
func TestIntentsAndRecords(t *testing.T) {
	e := storage.NewMem()
	b := e.NewBatch()
	commit(t, b,
		Put(b, []byte("a"), at(5), []byte("a5")),
		Put(b, []byte("k"), at(10), []byte("k10")),
		PutIntent(b, []byte("k"), at(20), []byte("k20"), 0, []byte("T1")),
		DeleteIntent(b, []byte("m"), at(20), []byte("T1")),
		b.Set(RecordKey([]byte("k"), []byte("T1")), []byte("record of T1")),
		b.Set(RecordKey([]byte("k\x00"), []byte("T2")), []byte("record of T2")),
		b.Set(RecordKey([]byte("a"), []byte("T3")), []byte("record of T3")),
	)
	if v := mustGet(t, e, "k", at(25)); string(v.Txn) != "T1" || string(v.Value) != "k20" || v.Timestamp != at(20) {
		t.Errorf("Get(k, 25) = %+v, want T1's intent k20@20", v)
	}
	if v := mustGet(t, e, "k", at(15)); v.Txn != nil || string(v.Value) != "k10" {
		t.Errorf("Get(k, 15) = %+v, want the committed k10 below the intent", v)
	}
	if v := mustGet(t, e, "m", at(25)); string(v.Txn) != "T1" || !v.Tombstone {
		t.Errorf("Get(m, 25) = %+v, want T1's deleting intent", v)
	}
	kvs, _, err := Scan(e, nil, nil, at(25), 100, 1<<20)
	var ie *IntentError
	if !errors.As(err, &ie) || string(ie.Key) != "k" || string(ie.Txn) != "T1" || ie.Timestamp != at(20) {
		t.Fatalf("Scan at 25 = %s, %v; want an IntentError at k of T1", fmtKVs(kvs), err)
	}
	kvs, _, err = Scan(e, nil, nil, at(15), 100, 1<<20)
	if want := fmt.Sprintf("  %q@%s = %q\n  %q@%s = %q\n", "a", at(5), "a5", "k", at(10), "k10"); err != nil || fmtKVs(kvs) != want {
		t.Errorf("Scan at 15 below the intents =\n%s%v, want\n%s", fmtKVs(kvs), err, want)
	}
	st, err := ComputeStats(e, nil, nil)
	if err != nil || st.Versions != 4 {
		t.Errorf("stats = %+v, %v; want the 4 versions and no record", st, err)
	}
	// GC at 30 keeps k's committed version under the intent (an abort
	// uncovers it).
	gb := e.NewBatch()
	_, gst, err := GC(e, gb, nil, nil, at(30), 100)
	commit(t, gb, err)
	if gst.Versions != 0 {
		t.Errorf("GC removed %d versions, want none", gst.Versions)
	}
	// A record lies in its anchor's span: [k, k\x00) holds T1's record
	// and not T2's, whose anchor is k\x00.
	lo, hi := EngineSpan([]byte("k"), []byte("k\x00"))
	it, err := e.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	var records []string
	for ok := it.First(); ok; ok = it.Next() {
		if _, isRec := recordAnchorEnd(it.Key()); isRec {
			records = append(records, string(it.Value()))
		}
	}
	it.Close()
	if fmt.Sprint(records) != "[record of T1]" {
		t.Errorf("records in [k, k\\x00) = %q, want T1's only", records)
	}
}

func TestRecordKeyOrder(t *testing.T) {
	for _, k := range []string{"", "a", "k", "k\x00", "k\x00\x01", "\x00"} {
		rk := RecordKey([]byte(k), []byte("\x00\x01txn"))
		if _, ok := recordAnchorEnd(rk); !ok {
			t.Errorf("RecordKey(%q) = %q is not seen as a record", k, rk)
		}
		if _, ok := recordAnchorEnd(AppendKey(nil, []byte(k), at(1))); ok {
			t.Errorf("a version of %q is seen as a record", k)
		}
		// Above every smaller key's versions, below the key's own.
		if own := AppendKey(nil, []byte(k), at(1<<62)); bytes.Compare(rk, own) >= 0 {
			t.Errorf("RecordKey(%q) sorts after the key's newest version", k)
		}
		if k != "" {
			prev := AppendKey(nil, []byte(k[:len(k)-1]), at(0))
			if bytes.Compare(rk, prev) <= 0 {
				t.Errorf("RecordKey(%q) sorts before the versions of %q", k, k[:len(k)-1])
			}
		}
	}
	if err := PutIntent(storage.NewMem().NewBatch(), []byte("k"), at(1), nil, 0, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("an intent without a transaction ID: %v", err)
	}
}
