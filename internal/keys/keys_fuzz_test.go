package keys

import (
	"bytes"
	"testing"
)

// FuzzDataKey: a user key survives the engine encoding, the encoding keeps
// the keys' order (scans depend on it), and a key inside a range's bounds
// lies inside its engine span.
func FuzzDataKey(f *testing.F) {
	f.Add([]byte("a"), []byte("b"), uint64(2))
	f.Add([]byte(""), []byte("\xff"), uint64(MetaRangeID))
	f.Add([]byte("k\x00"), []byte("k"), uint64(7))
	f.Fuzz(func(t *testing.T, a, b []byte, rangeID uint64) {
		ka, kb := DataKey(rangeID, a), DataKey(rangeID, b)
		if !bytes.Equal(UserKey(ka), a) {
			t.Fatalf("UserKey(DataKey(%q)) = %q", a, UserKey(ka))
		}
		if bytes.Compare(a, b) != bytes.Compare(ka, kb) {
			t.Fatalf("order of %q and %q not kept", a, b)
		}
		lo, hi := DataSpan(rangeID, a, nil)
		if bytes.Compare(kb, lo) < 0 != (bytes.Compare(b, a) < 0) || bytes.Compare(kb, hi) >= 0 {
			t.Fatalf("key %q against the span from %q: %q..%q", b, a, lo, hi)
		}
	})
}
