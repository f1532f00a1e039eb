package mvcc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
)

// FuzzKeyOrder checks the engine-key order on pairs of versions: user keys
// in their order, a key's versions newest first, and each version inside
// exactly the spans holding its user key. The seeds in
// testdata/fuzz/FuzzKeyOrder (prefixes, 0x00 and 0xFF bytes, keys that
// look like a terminator or an escape, equal keys) run under go test.
func FuzzKeyOrder(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b []byte, wa int64, la uint32, wb int64, lb uint32) {
		ta, tb := hlc.Timestamp{WallTime: wa, Logical: la}, hlc.Timestamp{WallTime: wb, Logical: lb}
		ea, eb := AppendKey(nil, a, ta), AppendKey(nil, b, tb)
		want := bytes.Compare(a, b)
		if want == 0 {
			want = tb.Compare(ta) // newest first
		}
		if got := bytes.Compare(ea, eb); got != want {
			t.Fatalf("%q@%s vs %q@%s: engine keys compare %d, want %d", a, ta, b, tb, got, want)
		}
		k, ts, err := DecodeKey(ea)
		if err != nil || !bytes.Equal(k, a) || ts != ta {
			t.Fatalf("DecodeKey(AppendKey(%q, %s)) = %q, %s, %v", a, ta, k, ts, err)
		}
		// The version of a lies in the engine span of [a, b) exactly when
		// a < b (an empty end is no bound), and that of b never does.
		lo, hi := EngineSpan(a, b)
		inA := bytes.Compare(ea, lo) >= 0 && (hi == nil || bytes.Compare(ea, hi) < 0)
		if wantIn := len(b) == 0 || bytes.Compare(a, b) < 0; inA != wantIn {
			t.Fatalf("%q@%s in the span of [%q, %q): %v, want %v", a, ta, a, b, inA, wantIn)
		}
		if len(b) > 0 && bytes.Compare(eb, lo) >= 0 && bytes.Compare(eb, hi) < 0 {
			t.Fatalf("%q@%s lies in the span of [%q, %q)", b, tb, a, b)
		}
	})
}

// FuzzDecodeKey: any bytes either decode to a version whose encoding they
// are, or are refused with ErrInvalidKey.
func FuzzDecodeKey(f *testing.F) {
	f.Add(AppendKey(nil, []byte("a\x00b"), hlc.Timestamp{WallTime: 7, Logical: 1}))
	f.Add([]byte("a\x00\x01"))
	f.Add(append([]byte("a\x00\x02b\x00\x01"), make([]byte, hlc.EncodedLen)...))
	f.Fuzz(func(t *testing.T, ek []byte) {
		k, ts, err := DecodeKey(ek)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("DecodeKey(%q): %v, not ErrInvalidKey", ek, err)
			}
			return
		}
		if back := AppendKey(nil, k, ts); !bytes.Equal(back, ek) {
			t.Fatalf("DecodeKey(%q) = %q@%s, which encodes to %q", ek, k, ts, back)
		}
	})
}

// FuzzDecodeValue: any bytes either decode to a value whose stored form
// they are, or are refused with ErrInvalidValue.
func FuzzDecodeValue(f *testing.F) {
	f.Add([]byte{formatV1, 0, 'x'})
	f.Add([]byte{formatV1, flagTombstone})
	f.Add([]byte{formatV1, flagTombstone, 'x'})
	f.Add([]byte{2, 0})
	f.Add([]byte{formatV1, 2})
	f.Add(appendValue(nil, []byte("x"), 7, false, nil))
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, tomb, err := decodeValue(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("decodeValue(%q): %v, not ErrInvalidValue", raw, err)
			}
			return
		}
		if back := appendValue(nil, v, expiresAt(raw), tomb, intentTxn(raw)); !bytes.Equal(back, raw) {
			t.Fatalf("decodeValue(%q) = %q, tombstone %v, stored as %q", raw, v, tomb, back)
		}
	})
}
