package memengine

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tidekv/tidekv/internal/storage"
)

// GetFirst finds what an iterator's First finds, on the engine and on a
// snapshot, for every index, grouped or not.
func TestGetFirstAgreesWithIterators(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{0x00, 0x01, 'a', 'b', 0xff}
	key := func(n int) []byte {
		k := make([]byte, n)
		for i := range k {
			k[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return k
	}
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			e := k.Open(t)
			write := func() {
				b := e.NewBatch()
				for range 200 {
					if kk := key(1 + rng.IntN(4)); rng.IntN(4) == 0 {
						_ = b.Delete(kk)
					} else {
						_ = b.Set(kk, key(rng.IntN(3)))
					}
				}
				if err := b.Commit(false); err != nil {
					t.Fatal(err)
				}
			}
			write()
			snap := e.NewSnapshot()
			defer snap.Close()
			write()
			for _, r := range []storage.Reader{e, snap} {
				for range 500 {
					lo, hi := key(rng.IntN(4)), key(1+rng.IntN(4))
					if bytes.Compare(lo, hi) > 0 {
						lo, hi = hi, lo
					}
					checkFirst(t, r, lo, hi)
				}
			}
		})
	}
}

func checkFirst(t *testing.T, r storage.Reader, lo, hi []byte) {
	t.Helper()
	k, v, ok, err := r.(storage.FirstGetter).GetFirst(lo, hi, []byte("prefix"))
	it, ierr := r.NewIter(lo, hi)
	if err != nil || ierr != nil {
		t.Fatal(err, ierr)
	}
	defer it.Close()
	want := it.First()
	if ok != want || ok && (!bytes.Equal(k, append([]byte("prefix"), it.Key()...)) || !bytes.Equal(v, it.Value())) {
		t.Fatalf("GetFirst [%x, %x) = %x %x %v; First: %v %x %x", lo, hi, k, v, ok, want, it.Key(), it.Value())
	}
}
