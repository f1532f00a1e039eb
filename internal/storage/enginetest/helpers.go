package enginetest

import (
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

// KV is one key/value pair, as strings to keep tables terse.
type KV struct{ K, V string }

// Op is one batch operation for Apply: Set, Del or DelRange.
type Op []string

// Apply commits ops in one synced batch.
func Apply(tb testing.TB, e storage.Engine, ops ...Op) {
	tb.Helper()
	b := e.NewBatch()
	defer b.Close()
	for _, op := range ops {
		var err error
		switch op[0] {
		case "set":
			err = b.Set([]byte(op[1]), []byte(op[2]))
		case "del":
			err = b.Delete([]byte(op[1]))
		case "delrange":
			err = b.DeleteRange([]byte(op[1]), []byte(op[2]))
		default:
			tb.Fatalf("bad op %q", op)
		}
		if err != nil {
			tb.Fatalf("%v: %v", op, err)
		}
	}
	if err := b.Commit(true); err != nil {
		tb.Fatalf("commit: %v", err)
	}
}

// Set, Del and DelRange are the operations Apply takes.
func Set(k, v string) Op      { return Op{"set", k, v} }
func Del(k string) Op         { return Op{"del", k} }
func DelRange(a, b string) Op { return Op{"delrange", a, b} }

// SetAll sets every pair in one synced batch.
func SetAll(tb testing.TB, e storage.Engine, kvs ...KV) {
	tb.Helper()
	ops := make([]Op, len(kvs))
	for i, p := range kvs {
		ops[i] = Set(p.K, p.V)
	}
	Apply(tb, e, ops...)
}

// Scan returns every pair of r in [lower, upper).
func Scan(tb testing.TB, r storage.Reader, lower, upper []byte) []KV {
	tb.Helper()
	it, err := r.NewIter(lower, upper)
	if err != nil {
		tb.Fatalf("NewIter: %v", err)
	}
	var out []KV
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, KV{string(it.Key()), string(it.Value())})
	}
	if err := it.Close(); err != nil {
		tb.Fatalf("iter close: %v", err)
	}
	return out
}

// keysOf returns the keys of kvs, in order.
func keysOf(kvs []KV) []string {
	out := []string{}
	for _, p := range kvs {
		out = append(out, p.K)
	}
	return out
}

// ScanKeys returns every key of r in [lower, upper).
func ScanKeys(tb testing.TB, r storage.Reader, lower, upper []byte) []string {
	tb.Helper()
	return keysOf(Scan(tb, r, lower, upper))
}

// MustGet reads key, failing the test on an error or a found nil value.
func MustGet(tb testing.TB, r storage.Reader, key string) (string, bool) {
	tb.Helper()
	v, ok, err := r.Get([]byte(key))
	if err != nil {
		tb.Fatalf("Get(%q): %v", key, err)
	}
	if ok && v == nil {
		tb.Fatalf("Get(%q): found but nil value", key)
	}
	return string(v), ok
}

// WantGet fails the test unless r holds exactly want at key (or, with
// !wantFound, nothing).
func WantGet(tb testing.TB, r storage.Reader, key, want string, wantFound bool) {
	tb.Helper()
	v, ok := MustGet(tb, r, key)
	if ok != wantFound || v != want {
		tb.Fatalf("Get(%q) = %q, %v; want %q, %v", key, v, ok, want, wantFound)
	}
}

func b(s string) []byte { return []byte(s) }

// emptyKeyReader yields the empty key, which no engine can hold, so tests
// can check that WriteSST refuses to ship it from a foreign Reader.
type emptyKeyReader struct{}

func (emptyKeyReader) Get([]byte) ([]byte, bool, error) { return nil, false, nil }

func (emptyKeyReader) NewIter(_, _ []byte) (storage.Iterator, error) {
	return &emptyKeyIter{}, nil
}

type emptyKeyIter struct{ valid bool }

func (it *emptyKeyIter) First() bool        { it.valid = true; return true }
func (it *emptyKeyIter) SeekGE([]byte) bool { return it.First() }
func (it *emptyKeyIter) Next() bool         { it.valid = false; return false }
func (it *emptyKeyIter) Valid() bool        { return it.valid }
func (it *emptyKeyIter) Key() []byte        { return []byte{} }
func (it *emptyKeyIter) Value() []byte      { return []byte("v") }
func (it *emptyKeyIter) Close() error       { return nil }
