package mvcc

import (
	"errors"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/storage"
)

// FirstChange finds a write, a delete or a new key in (from, to] and
// nothing outside it, steps over records, and refuses an intent at or
// below to.
func TestFirstChange(t *testing.T) {
	e := storage.NewMem()
	b := e.NewBatch()
	commit(t, b,
		Put(b, []byte("a"), at(5), []byte("a5")),
		Put(b, []byte("a"), at(40), []byte("a40")), // above every to below
		Put(b, []byte("b"), at(5), []byte("b5")),
		Delete(b, []byte("b"), at(15)),
		Put(b, []byte("c"), at(25), []byte("c25")),
		b.Set(RecordKey([]byte("b"), []byte("T9")), []byte("a record")),
		PutIntent(b, []byte("d"), at(35), []byte("d35"), 0, []byte("T1")),
	)
	for _, tc := range []struct {
		start, end string
		from, to   int64
		key        string
		at         int64
		intent     bool
	}{
		{"", "", 5, 10, "", 0, false},      // a's and b's writes at 5 are not after 5; a at 40 is past 10
		{"", "", 10, 20, "b", 15, false},   // the delete
		{"c", "", 10, 20, "", 0, false},    // c appears at 25, later
		{"", "", 20, 30, "c", 25, false},   // a new key
		{"", "c", 20, 30, "", 0, false},    // end is exclusive
		{"", "", 30, 36, "", 0, true},      // d's intent at 35
		{"", "", 26, 34, "", 0, false},     // below the intent and a's 40
		{"a", "b", 39, 45, "a", 40, false}, // a's newest version itself
	} {
		key, got, err := FirstChange(e, []byte(tc.start), []byte(tc.end), at(tc.from), at(tc.to), ChangeOptions{})
		var ie *IntentError
		if tc.intent {
			if !errors.As(err, &ie) || string(ie.Key) != "d" {
				t.Errorf("[%q, %q) in (%d, %d]: %q@%s, %v; want d's intent", tc.start, tc.end, tc.from, tc.to, key, got, err)
			}
			continue
		}
		want := hlc.Timestamp{}
		if tc.key != "" {
			want = at(tc.at)
		}
		if err != nil || string(key) != tc.key || got != want {
			t.Errorf("[%q, %q) in (%d, %d]: %q@%s, %v; want %q@%s", tc.start, tc.end, tc.from, tc.to, key, got, err, tc.key, want)
		}
	}
}

// With Own, FirstChange judges what lies below the refreshing
// transaction's own intent; with Expiry, a value live at from that expired
// at or before to is a change at its expiry (inclusive, as reads judge it).
func TestFirstChangeOwnIntentAndExpiry(t *testing.T) {
	e := storage.NewMem()
	b := e.NewBatch()
	commit(t, b,
		PutExpiring(b, []byte("e"), at(5), []byte("e5"), 50),
		Put(b, []byte("f"), at(5), []byte("f5")),
		PutIntent(b, []byte("f"), at(20), []byte("f20"), 0, []byte("T2")),
		PutIntent(b, []byte("g"), at(20), []byte("g20"), 0, []byte("T2")), // created by T2
		PutExpiring(b, []byte("h"), at(5), []byte("h5"), 60),
		PutIntent(b, []byte("h"), at(20), []byte("h20"), 0, []byte("T2")),
	)
	own := func(txn []byte) bool { return string(txn) == "T2" }
	for _, tc := range []struct {
		start    string
		from, to int64
		o        ChangeOptions
		key      string
		at       int64
	}{
		{"", 10, 40, ChangeOptions{Own: own, Expiry: true}, "", 0},
		{"", 10, 50, ChangeOptions{Own: own, Expiry: true}, "e", 50}, // e expires at 50
		{"", 10, 50, ChangeOptions{Own: own}, "", 0},                 // expiry not asked for
		{"", 50, 70, ChangeOptions{Own: own, Expiry: true}, "h", 60}, // e was gone at 50; h's value below T2's intent expires at 60
		{"f", 25, 55, ChangeOptions{Own: own, Expiry: true}, "", 0},  // T2's intents at or below from
	} {
		key, got, err := FirstChange(e, []byte(tc.start), nil, at(tc.from), at(tc.to), tc.o)
		want := hlc.Timestamp{}
		if tc.key != "" {
			want = at(tc.at)
		}
		if err != nil || string(key) != tc.key || got != want {
			t.Errorf("[%q, ) in (%d, %d] expiry %v: %q@%s, %v; want %q@%s", tc.start, tc.from, tc.to, tc.o.Expiry, key, got, err, tc.key, want)
		}
	}
	// Without Own, T2's intent is another transaction's.
	var ie *IntentError
	if _, _, err := FirstChange(e, []byte("f"), nil, at(10), at(40), ChangeOptions{Expiry: true}); !errors.As(err, &ie) || string(ie.Key) != "f" {
		t.Errorf("without Own: %v; want f's intent", err)
	}
}
