package keyspace

import (
	"bytes"
	"fmt"
	"sort"
	"testing"
)

func TestCodecRoundTripAndOrder(t *testing.T) {
	ord, hashed := Codec{ID: 3, Mode: Ordered}, Codec{ID: 4, Mode: Hashed}
	keys := [][]byte{[]byte("a"), []byte("ab"), []byte("b"), []byte("zz"), {0xff, 0xff}}
	for _, c := range []Codec{ord, hashed, {ID: Default}} {
		lo, hi := Span(c.ID)
		for _, k := range keys {
			if c.ID == Default && IsReserved(k) {
				continue
			}
			e := c.Encode(k)
			if got, ok := c.Decode(e); !ok || !bytes.Equal(got, k) {
				t.Errorf("%+v: Decode(Encode(%q)) = %q, %v", c, k, got, ok)
			}
			if c.ID == Default {
				continue
			}
			if !c.Owns(e) {
				t.Errorf("%+v: does not own its own key %x", c, e)
			}
			if Of(e) != c.ID || bytes.Compare(e, lo) < 0 || bytes.Compare(e, hi) >= 0 {
				t.Errorf("%+v: %x outside [%x, %x) or Of = %d", c, e, lo, hi, Of(e))
			}
			if _, ok := (Codec{ID: c.ID + 1, Mode: c.Mode}).Decode(e); ok {
				t.Errorf("%+v: key %x decodes in the next key space", c, e)
			}
		}
	}
	// Ordered keeps the user keys' order; hashed orders them by hash.
	var enc [][]byte
	for _, k := range keys {
		enc = append(enc, ord.Encode(k))
	}
	if !sort.SliceIsSorted(enc, func(i, j int) bool { return bytes.Compare(enc[i], enc[j]) < 0 }) {
		t.Error("ordered encoding does not keep the order of the keys")
	}
	a, b := hashed.Encode([]byte("a")), hashed.Encode([]byte("b"))
	if (bytes.Compare(a, b) < 0) != (Hash([]byte("a")) < Hash([]byte("b"))) {
		t.Error("hashed keys are not ordered by hash")
	}
	// A hashed key whose hash is not its key's is not the key space's.
	forged := append(Prefix(4), make([]byte, 8)...)
	if hashed.Owns(append(forged, 'a')) || !hashed.Owns(hashed.Encode([]byte("a"))) || ord.Owns(hashed.Encode([]byte("a"))) {
		t.Error("Owns accepts a key placed at the wrong hash or in another key space")
	}
	// A default key in the reserved area is not the default key space's.
	if _, ok := (Codec{}).Decode([]byte{0xff, 0xff, 1}); ok || !IsReserved([]byte{0xff, 0xff}) || IsReserved([]byte{0xff, 0xfe}) {
		t.Error("the reserved area is not refused to the default key space")
	}
}

// Keys alike but for their last bytes spread over the whole hash range:
// each quarter of it gets about a quarter of them.
func TestHashSpreadsSimilarKeys(t *testing.T) {
	var quarters [4]int
	for i := 0; i < 1000; i++ {
		quarters[Hash(fmt.Appendf(nil, "user%04d", i))>>62]++
	}
	for q, n := range quarters {
		if n < 200 || n > 300 {
			t.Errorf("quarter %d of the hash range holds %d of 1000 keys: %v", q, n, quarters)
		}
	}
}

func TestOfIsMonotone(t *testing.T) {
	ks := [][]byte{nil, []byte("x"), {0xff}, {0xff, 0xff}, {0xff, 0xff, 0, 0, 0}, Prefix(1), append(Prefix(1), 0xff), Prefix(2), {0xff, 0xff, 0, 0, 0, 2, 1}, Prefix(1 << 20)}
	for i := 1; i < len(ks); i++ {
		if Of(ks[i-1]) > Of(ks[i]) {
			t.Errorf("Of(%x) = %d > Of(%x) = %d", ks[i-1], Of(ks[i-1]), ks[i], Of(ks[i]))
		}
	}
	if Of(Prefix(7)) != 7 || Of([]byte("plain")) != Default {
		t.Error("Of misreads a prefix")
	}
}

func TestEncodeSpan(t *testing.T) {
	c := Codec{ID: 5, Mode: Ordered}
	lo, hi := c.EncodeSpan([]byte("b"), nil)
	if _, end := Span(5); !bytes.Equal(hi, end) || !bytes.Equal(lo, c.Encode([]byte("b"))) {
		t.Errorf("EncodeSpan(b, end) = %x, %x", lo, hi)
	}
	if _, hi := (Codec{}).EncodeSpan(nil, nil); !bytes.Equal(hi, []byte{0xff, 0xff}) {
		t.Errorf("the default key space's span ends at %x", hi)
	}
}
