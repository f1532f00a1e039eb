package resp

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// legacySet writes set k as a TideKV before member positions did: the
// metadata's b 0, each member a key with an empty value, no positions.
func legacySet(f *fakeKV, k string, members ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := meta{gen: 7, ver: 1, a: uint64(len(members))}
	f.set(encKey([]byte(k)), encodeMeta(setMarker, m), Expiry{})
	for _, mem := range members {
		f.set(append(elemPrefix([]byte(k), m.gen), mem...), nil, Expiry{})
	}
}

// isNumbered reports whether set k's metadata says its members are
// numbered.
func isNumbered(t *testing.T, f *fakeKV, k string) bool {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := decodeMeta(setMarker, f.m[string(encKey([]byte(k)))])
	if !ok {
		t.Fatalf("%s: no set", k)
	}
	return m.b == setNumbered
}

// A set written before member positions, too large to number in a write
// (more than maxNumbering members), answers every set command as Redis
// would, served as it was (member keys only; draws by scanning), and
// stays as it is.
func TestLegacyLargeSet(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	all := map[string]bool{}
	var members []string
	for i := range maxNumbering + 200 {
		m := fmt.Sprintf("m%04d", i)
		members, all[m] = append(members, m), true
	}
	legacySet(kv, "L", members...)
	legacySet(kv, "S", "m0001", "m0002", "x")
	eqReplies(t, pipeline(t, s, []string{"SCARD", "L"}, []string{"SISMEMBER", "L", "m0005"}, []string{"SMISMEMBER", "L", "no", "m1100"},
		[]string{"SINTER", "L", "S"}, []string{"SDIFF", "S", "L"}, []string{"SINTERCARD", "2", "L", "S"}),
		[]string{":1200", ":1", "*[:0 :1]", "*[$m0001 $m0002]", "*[$x]", ":2"})

	distinctMembers := func(rep string, n int) []string {
		t.Helper()
		got := bulks(rep)
		seen := map[string]bool{}
		for _, m := range got {
			if !all[m] || seen[m] {
				t.Fatalf("%s: %q not a member or repeated", rep, m)
			}
			seen[m] = true
		}
		eq(t, len(got), n)
		return got
	}
	reps := pipeline(t, s, []string{"SRANDMEMBER", "L", "5"}, []string{"SRANDMEMBER", "L", "-7"}, []string{"SRANDMEMBER", "L"}, []string{"SPOP", "L", "3"}, []string{"SPOP", "L"})
	distinctMembers(reps[0], 5)
	for _, m := range bulks(reps[1]) {
		if !all[m] {
			t.Fatalf("SRANDMEMBER L -7: %q", m)
		}
	}
	eq(t, len(bulks(reps[1])), 7)
	if !all[strings.TrimPrefix(reps[2], "$")] {
		t.Fatalf("SRANDMEMBER L: %s", reps[2])
	}
	popped := append(distinctMembers(reps[3], 3), strings.TrimPrefix(reps[4], "$"))
	for _, m := range popped {
		delete(all, m)
		eqReplies(t, pipeline(t, s, []string{"SISMEMBER", "L", m}), []string{":0"})
	}
	keep := slices.Sorted(func(yield func(string) bool) {
		for m := range all {
			if !yield(m) {
				return
			}
		}
	})
	eqReplies(t, pipeline(t, s, []string{"SCARD", "L"}, []string{"SADD", "L", "new", "new2", keep[0]}, []string{"SREM", "L", "new2", "no", keep[1]},
		[]string{"SMOVE", "L", "N", keep[2]}, []string{"SMOVE", "L", "N", "no"}, []string{"SMEMBERS", "N"}, []string{"SCARD", "L"}),
		[]string{":1196", ":2", ":2", ":1", ":0", "*[$" + keep[2] + "]", ":1195"})
	left := bulks(pipeline(t, s, []string{"SMEMBERS", "L"})[0])
	eq(t, len(left), 1195)
	eq(t, slices.Contains(left, "new"), true)
	eq(t, slices.Contains(left, keep[1]), false)
	eqReplies(t, pipeline(t, s, []string{"SUNIONSTORE", "U", "L", "N"}, []string{"SCARD", "U"}), []string{":1196", ":1196"})
	checkPositions(t, kv, "U")
	eq(t, isNumbered(t, kv, "L"), false)
}

// A set written before member positions and small enough is numbered by
// its first write (SADD, SREM, SPOP, SMOVE), in that write's transaction;
// reads leave it as it is, and so does an SMOVE that does not write it.
func TestLegacySmallSetNumbered(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		legacySet(kv, k, "1", "2", "3", "4")
	}
	reps := pipeline(t, s, []string{"SMEMBERS", "a"}, []string{"SISMEMBER", "a", "2"}, []string{"SRANDMEMBER", "a", "10"},
		[]string{"SUNION", "a", "b"}, []string{"SMOVE", "a", "b", "9"})
	drawn := slices.Sorted(slices.Values(bulks(reps[2])))
	eq(t, strings.Join(drawn, " "), "1 2 3 4")
	eqReplies(t, slices.Delete(reps, 2, 3), []string{"*[$1 $2 $3 $4]", ":1", "*[$1 $2 $3 $4]", ":0"})
	for _, k := range []string{"a", "b"} {
		eq(t, isNumbered(t, kv, k), false)
	}
	reps = pipeline(t, s, []string{"SADD", "a", "1", "5"}, []string{"SREM", "b", "1"}, []string{"SPOP", "c", "2"},
		[]string{"SMOVE", "d", "e", "4"}, []string{"SADD", "f", "1"},
		[]string{"SMEMBERS", "a"}, []string{"SMEMBERS", "b"}, []string{"SCARD", "c"}, []string{"SMEMBERS", "d"}, []string{"SMEMBERS", "e"})
	eqReplies(t, slices.Delete(slices.Clone(reps), 2, 3), []string{":1", ":1", ":1", ":0",
		"*[$1 $2 $3 $4 $5]", "*[$2 $3 $4]", ":2", "*[$1 $2 $3]", "*[$1 $2 $3 $4]"})
	eq(t, len(bulks(reps[2])), 2)
	for _, k := range []string{"a", "b", "c", "d", "f"} {
		eq(t, isNumbered(t, kv, k), true)
		checkPositions(t, kv, k)
	}
	// e had the member SMOVE moved: not written, not numbered.
	eq(t, isNumbered(t, kv, "e"), false)
	eqReplies(t, pipeline(t, s, []string{"SMOVE", "a", "e", "5"}, []string{"SMEMBERS", "e"}), []string{":1", "*[$1 $2 $3 $4 $5]"})
	eq(t, isNumbered(t, kv, "e"), true)
	checkPositions(t, kv, "e")
	// Numbered, its draws are positions'.
	eqReplies(t, pipeline(t, s, []string{"SPOP", "a", "10"}, []string{"EXISTS", "a"})[1:], []string{":0"})
}
