package mvcc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
)

func at(wall int64) hlc.Timestamp { return hlc.Timestamp{WallTime: wall} }

func TestKeyLayout(t *testing.T) {
	ts := hlc.Timestamp{WallTime: 0x0102, Logical: 3}
	inv := ts.AppendEncoded(nil)
	for i := range inv {
		inv[i] = ^inv[i]
	}
	want := append([]byte("a\x00\xffb\x00\x01"), inv...)
	if got := AppendKey(nil, []byte("a\x00b"), ts); !bytes.Equal(got, want) {
		t.Fatalf("AppendKey = %x, want %x", got, want)
	}
	// Appending leaves dst's bytes alone.
	if got := AppendKey([]byte("pre"), []byte("a\x00b"), ts); !bytes.Equal(got, append([]byte("pre"), want...)) {
		t.Fatalf("AppendKey after a prefix = %x", got)
	}
}

// Sorting many random versions by their engine keys gives user keys in
// order, each key's versions together and newest first.
func TestKeyOrderRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	type version struct {
		key []byte
		ts  hlc.Timestamp
	}
	var vs []version
	for range 5000 {
		k := make([]byte, rng.IntN(4))
		for i := range k {
			k[i] = []byte{0x00, 0x01, 0x02, 0xfe, 0xff, 'a'}[rng.IntN(6)]
		}
		vs = append(vs, version{k, hlc.Timestamp{WallTime: int64(rng.IntN(5)) - 2, Logical: uint32(rng.IntN(3))}})
	}
	byEngine := slices.Clone(vs)
	slices.SortFunc(byEngine, func(a, b version) int {
		return bytes.Compare(AppendKey(nil, a.key, a.ts), AppendKey(nil, b.key, b.ts))
	})
	slices.SortFunc(vs, func(a, b version) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return b.ts.Compare(a.ts)
	})
	for i := range vs {
		if !bytes.Equal(vs[i].key, byEngine[i].key) || vs[i].ts != byEngine[i].ts {
			t.Fatalf("position %d: engine order has %q@%s, want %q@%s", i, byEngine[i].key, byEngine[i].ts, vs[i].key, vs[i].ts)
		}
	}
}

func TestDecodeKeyRefusesMalformedKeys(t *testing.T) {
	good := AppendKey(nil, []byte("a\x00b"), at(5))
	if k, ts, err := DecodeKey(good); err != nil || string(k) != "a\x00b" || ts != at(5) {
		t.Fatalf("DecodeKey = %q, %s, %v", k, ts, err)
	}
	// Without a 0x00 in the user key, the user key aliases the input.
	plain := AppendKey(nil, []byte("ab"), at(5))
	if k, _, _ := DecodeKey(plain); &k[0] != &plain[0] {
		t.Error("DecodeKey copied a user key that needed no unescaping")
	}
	for name, ek := range map[string][]byte{
		"too short":           good[:suffixLen-1],
		"no terminator":       append([]byte("ab\x00\x02"), make([]byte, hlc.EncodedLen)...),
		"unescaped zero":      append([]byte("a\x00b\x00\x01"), make([]byte, hlc.EncodedLen)...),
		"zero at the end":     append([]byte("a\x00\x00\x01"), make([]byte, hlc.EncodedLen)...),
		"timestamp too short": good[:len(good)-1],
	} {
		if _, _, err := DecodeKey(ek); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: DecodeKey(%q) err = %v, want ErrInvalidKey", name, ek, err)
		}
	}
}

func TestDecodeValueRefusesWhatItDoesNotKnow(t *testing.T) {
	for _, tc := range []struct {
		raw  []byte
		want string
	}{
		{[]byte{formatV1}, "shorter than the 2-byte header"},
		{[]byte{2, 0, 'x'}, "format 2, this binary reads format 1"},
		{[]byte{formatV1, 0x08, 'x'}, "bits this binary does not know (0x08)"},
		{[]byte{formatV1, flagIntent}, "an intent without its transaction"},
		{[]byte{formatV1, flagIntent, 0}, "an intent without its transaction"},
		{[]byte{formatV1, flagIntent, 3, 'a'}, "an intent without its transaction"},
		{[]byte{formatV1, flagIntent, 0x80}, "an intent without its transaction"},
		{[]byte{formatV1, flagIntent, 0x81, 0x00, 'a'}, "an intent without its transaction"},
		{[]byte{formatV1, flagIntent | flagTombstone, 1, 'a', 'x'}, "a tombstone carrying 1 bytes"},
		{[]byte{formatV1, flagTombstone, 'x'}, "a tombstone carrying 1 bytes"},
		{[]byte{formatV1, flagTombstone | flagExpires}, "a tombstone with an expiry"},
		{[]byte{formatV1, flagExpires, 0, 0, 0}, "shorter than its expiry"},
		{[]byte{formatV1, flagExpires, 0, 0, 0, 0, 0, 0, 0, 0, 'x'}, "expiry 0 is not positive"},
		{[]byte{formatV1, flagExpires, 0x80, 0, 0, 0, 0, 0, 0, 0}, "is not positive"},
	} {
		_, _, err := decodeValue(tc.raw)
		if !errors.Is(err, ErrInvalidValue) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("decodeValue(%q) err = %v, want one saying %q", tc.raw, err, tc.want)
		}
	}
}
