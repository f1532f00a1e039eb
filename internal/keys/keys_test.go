package keys

import (
	"bytes"
	"testing"
)

func TestKeyClassesDoNotInterleave(t *testing.T) {
	lo, hi := RangeLocalSpan(7)
	for _, k := range [][]byte{HardStateKey(7), ReplicaStateKey(7), LogKey(7, 1), LogKey(7, 1<<40), TombstoneKey(7)} {
		if bytes.Compare(k, lo) < 0 || bytes.Compare(k, hi) >= 0 {
			t.Fatalf("key %x outside range-local span of range 7", k)
		}
	}
	if !IsReplicaStateKey(ReplicaStateKey(9)) || IsReplicaStateKey(HardStateKey(9)) {
		t.Fatal("IsReplicaStateKey misclassifies")
	}
	if id, ok := RangeIDFromLocalKey(LogKey(42, 3)); !ok || id != 42 {
		t.Fatalf("RangeIDFromLocalKey = %d, %v", id, ok)
	}
	ml, mh := DataSpan(MetaRangeID, nil, nil)
	ul, uh := DataSpan(FirstUserRangeID, nil, nil)
	if bytes.Compare(mh, ul) > 0 || bytes.Compare(ml, hi) < 0 || bytes.Compare(uh, []byte{0xff}) >= 0 {
		t.Fatalf("data spans overlap: meta [%x,%x) user [%x,%x)", ml, mh, ul, uh)
	}
	// Versioned user data lies above the unversioned, and its span of a
	// bounded range holds exactly the range's keys.
	vl, vh := VersionedSpan(nil, nil)
	if bytes.Compare(uh, vl) > 0 || bytes.Compare(vh, []byte{0xff}) >= 0 {
		t.Fatalf("versioned span [%x,%x) overlaps unversioned [%x,%x)", vl, vh, ul, uh)
	}
	bl, bh := VersionedSpan([]byte("b"), []byte("m"))
	for k, in := range map[string]bool{"a": false, "b": true, "lzz": true, "m": false} {
		vk := VersionedKey([]byte(k))
		if got := bytes.Compare(vk, bl) >= 0 && bytes.Compare(vk, bh) < 0; got != in || !bytes.Equal(UserKey(vk), []byte(k)) {
			t.Errorf("versioned key of %q: in [b, m) %v, user key %q", k, got, UserKey(vk))
		}
	}
	// Log keys sort by index.
	if bytes.Compare(LogKey(1, 255), LogKey(1, 256)) >= 0 {
		t.Fatal("log keys must sort by index")
	}
}

func TestContainsAndOverlaps(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	cases := []struct {
		start, end, key string
		want            bool
	}{
		{"", "", "x", true},
		{"a", "c", "a", true},
		{"a", "c", "c", false},
		{"a", "", "zzz", true},
		{"b", "", "a", false},
	}
	for _, c := range cases {
		if got := Contains(b(c.start), b(c.end), b(c.key)); got != c.want {
			t.Errorf("Contains(%q,%q,%q)=%v", c.start, c.end, c.key, got)
		}
	}
	if !Overlaps(b("a"), b("c"), b("b"), b("")) || Overlaps(b("a"), b("b"), b("b"), b("c")) || !Overlaps(b(""), b(""), b("q"), b("r")) {
		t.Fatal("Overlaps wrong")
	}
}

// The Append forms append exactly the key the plain forms return.
func TestAppendKeys(t *testing.T) {
	head := []byte("head")
	for _, c := range []struct{ got, want []byte }{
		{AppendLogKey(head[:4:4], 7, 1<<40), LogKey(7, 1<<40)},
		{AppendHardStateKey(head[:4:4], 7), HardStateKey(7)},
		{AppendReplicaStateKey(head[:4:4], 7), ReplicaStateKey(7)},
	} {
		if !bytes.Equal(c.got, append([]byte("head"), c.want...)) {
			t.Fatalf("appended %x, want head+%x", c.got, c.want)
		}
	}
}
