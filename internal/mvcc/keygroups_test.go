package mvcc

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
)

// A span KeyGroups calls one group holds keys of that group only, and a
// key's versions are such a span.
func TestKeyGroups(t *testing.T) {
	var g KeyGroups
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 0x02, 'a', 0xfe, 0xff}
	key := func() []byte {
		k := make([]byte, rng.IntN(6))
		for i := range k {
			k[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return k
	}
	within := 0
	for range 200000 {
		lo, hi, x := key(), key(), key()
		if !g.Within(lo, hi) || bytes.Compare(x, lo) < 0 || bytes.Compare(x, hi) >= 0 {
			continue
		}
		within++
		if n := g.GroupLen(lo); g.GroupLen(x) != n || !bytes.Equal(x[:n], lo[:n]) {
			t.Fatalf("[%x, %x) is one group, but %x is of another", lo, hi, x)
		}
	}
	if within == 0 {
		t.Fatal("no span was one group")
	}
	for _, k := range [][]byte{[]byte("k"), {0x06, 'a', 0x00, 'b'}, {}} {
		p := appendPrefix(nil, k)
		lo, hi := AppendKey(nil, k, hlc.Timestamp{WallTime: 7}), appendVersionsEnd(nil, p)
		if !g.Within(lo, hi) || g.GroupLen(lo) != len(p)-1 {
			t.Fatalf("the versions of %q are not one group: %d of %x", k, g.GroupLen(lo), lo)
		}
	}
}
