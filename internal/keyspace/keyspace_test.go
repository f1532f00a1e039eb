package keyspace

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
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

func TestValidate(t *testing.T) {
	ok := DefaultSettings()
	ok.Name = "cache"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"http://origin:8080/v", "https://origin"} {
		s := ok
		s.MissHandler = h
		if err := s.Validate(); err != nil {
			t.Errorf("miss handler %q refused: %v", h, err)
		}
	}
	grow := ok
	grow.OnFull, grow.CapacityPerNode = Grow, 1<<30
	if err := grow.Validate(); err != nil {
		t.Errorf("on-full grow with a capacity refused: %v", err)
	}
	for _, c := range []struct {
		mut  func(*Settings)
		want string
	}{
		{func(s *Settings) { s.Name = "Bad Name" }, "name"},
		{func(s *Settings) { s.Name = "" }, "name"},
		{func(s *Settings) { s.Mode = "sorted" }, `unknown mode "sorted"`},
		{func(s *Settings) { s.Engine = "rocks" }, `unknown engine "rocks"`},
		{func(s *Settings) { s.Index = "btree" }, "memory engine only"},
		{func(s *Settings) { s.Engine, s.Index = Memory, "trie" }, `unknown index "trie"`},
		{func(s *Settings) { s.RF = -1 }, "replication factor -1"},
		{func(s *Settings) { s.RF = 9 }, "replication factor 9"},
		{func(s *Settings) { s.TTL = -time.Second }, "must not be negative"},
		{func(s *Settings) { s.TTL = time.Microsecond }, "whole milliseconds"},
		{func(s *Settings) { s.MissHandler = "ftp://origin/x" }, `miss handler "ftp://origin/x" must be an http or https URL`},
		{func(s *Settings) { s.MissHandler = "origin:8080" }, "must be an http or https URL"},
		{func(s *Settings) { s.MissHandler = "http:///path" }, "with a host"},
		{func(s *Settings) { s.MissHandler = "http://origin/v?x=1" }, "no query"},
		{func(s *Settings) { s.OnFull = "spill" }, `unknown on-full "spill"`},
		{func(s *Settings) { s.OnFull = "" }, `unknown on-full ""`},
		{func(s *Settings) { s.OnFull = Grow }, "on-full grow needs a capacity per node"},
	} {
		s := ok
		c.mut(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error naming %q", s, err, c.want)
		}
	}
}

func TestCatalogue(t *testing.T) {
	c := NewCatalogue([]KeySpace{{ID: 2, Settings: Settings{Name: "b", Mode: Hashed}}, {ID: 1, Settings: Settings{Name: "a", Mode: Ordered}}})
	if k, ok := c.ByName("b"); !ok || k.ID != 2 {
		t.Errorf("ByName(b) = %+v, %v", k, ok)
	}
	if k, ok := c.ByID(0); !ok || k.Name != DefaultName {
		t.Errorf("ByID(0) = %+v, %v", k, ok)
	}
	if _, ok := c.ByID(3); ok {
		t.Error("ByID(3) found a key space")
	}
	s := DefaultSettings()
	s.Name = "a"
	if err := c.CheckNew(s); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("CheckNew of an existing name: %v", err)
	}
	s.Name = DefaultName
	if err := c.CheckNew(s); err == nil {
		t.Error("CheckNew accepted the default key space's name")
	}
	b := c.Boundaries()
	want := append([][]byte{{0xff, 0xff}, Prefix(1), Prefix(2)}, append(HashSliceStarts(2), Prefix(3))...)
	if len(b) != len(want) {
		t.Fatalf("Boundaries = %x", b)
	}
	for i := range b {
		if !bytes.Equal(b[i], want[i]) {
			t.Errorf("boundary %d = %x, want %x", i, b[i], want[i])
		}
	}
	// Key space 2 is hashed: its slices are equal spans of hash values.
	starts := HashSliceStarts(2)
	if len(starts) != HashSlices-1 || !bytes.Equal(starts[0], append(Prefix(2), 0x20, 0, 0, 0, 0, 0, 0, 0)) ||
		!bytes.Equal(starts[HashSlices-2], append(Prefix(2), 0xe0, 0, 0, 0, 0, 0, 0, 0)) {
		t.Errorf("hash slice starts = %x", starts)
	}
	if len(Catalogue(nil).Boundaries()) != 0 {
		t.Error("an empty catalogue splits ranges")
	}
}
