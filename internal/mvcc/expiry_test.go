package mvcc

import (
	"errors"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

func TestExpiryVisibility(t *testing.T) {
	e := storage.NewMem()
	b := e.NewBatch()
	for _, err := range []error{
		PutExpiring(b, []byte("a"), at(10), []byte("lives to 50"), 50),
		PutExpiring(b, []byte("b"), at(10), []byte("old"), 0),
		PutExpiring(b, []byte("b"), at(20), []byte("lives to 30"), 30),
		Put(b, []byte("c"), at(10), []byte("forever")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()

	// Get returns the version as stored; LiveAt judges it at a time, with
	// the expiry itself already past (every reader at one time agrees).
	v := mustGet(t, e, "a", at(60))
	if string(v.Value) != "lives to 50" || v.ExpiresAt != 50 {
		t.Fatalf("Get(a) = %+v", v)
	}
	for now, want := range map[int64]bool{10: true, 49: true, 50: false, 51: false} {
		if got := v.LiveAt(now); got != want {
			t.Errorf("LiveAt(%d) = %v, want %v", now, got, want)
		}
	}
	// An expired newest version hides the older one: it expired as a
	// whole key, not back to its predecessor.
	if v := mustGet(t, e, "b", at(40)); v.LiveAt(40) || v.ExpiresAt != 30 {
		t.Errorf("Get(b) at 40 = %+v, live %v", v, v.LiveAt(40))
	}
	if v := mustGet(t, e, "b", at(15)); !v.LiveAt(15) || string(v.Value) != "old" || v.ExpiresAt != 0 {
		t.Errorf("Get(b) at 15 = %+v", v)
	}

	scanKeys := func(kvs []KeyValue, _ []byte, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		s := ""
		for _, kv := range kvs {
			s += string(kv.Key)
		}
		return s
	}
	for ts, want := range map[int64]string{25: "abc", 30: "ac", 50: "c"} {
		if got := scanKeys(Scan(e, nil, nil, at(ts), 10, 1<<20)); got != want {
			t.Errorf("Scan at %d = %q, want %q", ts, got, want)
		}
	}
	// ScanNewest reads the newest versions and judges expiry at now.
	if got := scanKeys(ScanNewest(e, nil, nil, 29, 10, 1<<20)); got != "abc" {
		t.Errorf("ScanNewest at 29 = %q", got)
	}
	if got := scanKeys(ScanNewest(e, nil, nil, 30, 10, 1<<20)); got != "ac" {
		t.Errorf("ScanNewest at 30 = %q", got)
	}
	kvs, _, _ := ScanNewest(e, []byte("a"), []byte("b"), 0, 10, 1<<20)
	if len(kvs) != 1 || kvs[0].ExpiresAt != 50 || string(kvs[0].Value) != "lives to 50" {
		t.Errorf("ScanNewest(a) = %+v", kvs)
	}

	if err := PutExpiring(e.NewBatch(), []byte("x"), at(1), nil, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("PutExpiring with a negative expiry: %v", err)
	}
}
