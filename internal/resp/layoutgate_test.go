package resp

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// spanOf is what f holds for key k (no NUL in it): its metadata and every
// key of its field span.
func spanOf(f *fakeKV, k string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for key, v := range f.m {
		if key == k || strings.HasPrefix(key, k+"\x00\x01") {
			out[key] = string(v)
		}
	}
	return out
}

func be64(u uint64) string { return string(binary.BigEndian.AppendUint64(nil, u)) }

// olderSetSpan is what a TideKV before set positions (log version 12)
// writes for set k of generation gen, version ver, holding members:
// spelt out here from that encoding (the metadata: marker, gen, ver,
// count, 0; a member: enc(k) 0x00 0x01 gen m with an empty value; nothing
// else), not by the code under test.
func olderSetSpan(k string, gen, ver uint64, members []string) map[string]string {
	out := map[string]string{k: "\xffTideKV:set\x00\x01\xfe" + be64(gen) + be64(ver) + be64(uint64(len(members))) + be64(0)}
	for _, m := range members {
		out[k+"\x00\x01"+be64(gen)+m] = ""
	}
	return out
}

// olderZSetSpan is what a TideKV at log version 12 writes for sorted set
// z of members with their scores: the metadata is the marker and the count
// alone (a longer value is a string to it); a member is enc(z) 0x00 0x01
// 0x01 m and its index entry enc(z) 0x00 0x01 0x02 sort(s) m, both with
// the score (the index's sort order, zIndexKey, is as it was).
func olderZSetSpan(z string, members []string, scores []float64) map[string]string {
	out := map[string]string{z: "\xffTideKV:zset\x00\x01\xfe" + be64(uint64(len(members)))}
	for i, m := range members {
		out[z+"\x00\x01\x01"+m] = string(zScoreBytes(scores[i]))
		out[string(zIndexKey([]byte(z), []byte(m), scores[i]))] = string(zScoreBytes(scores[i]))
	}
	return out
}

func eqSpan(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: %q = %q (found %v), want %q", what, k, g, ok, v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: %q = %q, which a binary at log version 12 does not write", what, k, v)
		}
	}
}

// checkOlderSet fails unless set k is exactly what a binary at log
// version 12 writes for the members SMEMBERS answers.
func checkOlderSet(t *testing.T, s *Server, f *fakeKV, k string) {
	t.Helper()
	got := spanOf(f, k)
	m, ok := decodeMeta(setMarker, []byte(got[k]))
	if !ok {
		t.Fatalf("%s: no set metadata (%q)", k, got[k])
	}
	eqSpan(t, k, got, olderSetSpan(k, m.gen, m.ver, bulks(pipeline(t, s, []string{"SMEMBERS", k})[0])))
}

// checkOlderZSet fails unless sorted set z is exactly what a binary at
// log version 12 writes for the members and scores ZRANGE answers.
func checkOlderZSet(t *testing.T, s *Server, f *fakeKV, z string) {
	t.Helper()
	rep := bulks(pipeline(t, s, []string{"ZRANGE", z, "0", "-1", "WITHSCORES"})[0])
	var members []string
	var scores []float64
	for i := 0; i+1 < len(rep); i += 2 {
		sc, err := strconv.ParseFloat(rep[i+1], 64)
		if err != nil {
			t.Fatal(err)
		}
		members, scores = append(members, rep[i]), append(scores, sc)
	}
	eqSpan(t, z, spanOf(f, z), olderZSetSpan(z, members, scores))
}

// zHasHint reports whether sorted set z's metadata carries a start hint.
func zHasHint(f *fakeKV, z string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.m[z]
	return isZSetMeta(v) && len(zsetHint(v)) > 0
}

// Until the cluster reaches log version 13 (SetPositioner false) the
// front end writes sets and sorted sets exactly as a binary at 12 does:
// no member positions, no numbering of sets written before, no start
// hint; a node on such a binary may write the same keys, and would break
// the positions or take the metadata for a string. From 13 on, the same
// commands number sets and set start hints.
func TestLayoutsWaitForTheGate(t *testing.T) {
	type row struct {
		name string
		// older: sets written by a binary at 12 before the commands.
		older map[string][]string
		run   func(t *testing.T, s *Server)
		// sets and zsets written; hinted: those of zsets that get a
		// start hint once the gate is open.
		sets, zsets, hinted []string
	}
	cmds := func(cs ...[]string) func(t *testing.T, s *Server) {
		return func(t *testing.T, s *Server) { pipeline(t, s, cs...) }
	}
	rows := []row{
		{name: "SADD", run: cmds([]string{"SADD", "s", "a", "b", "c"}, []string{"SADD", "s", "c", "d"}), sets: []string{"s"}},
		{name: "SREM leaving a hole", run: cmds([]string{"SADD", "s", "a", "b", "c", "d"}, []string{"SREM", "s", "b", "x"}), sets: []string{"s"}},
		{name: "SPOP", run: cmds([]string{"SADD", "s", "a", "b", "c", "d", "e"}, []string{"SPOP", "s", "2"}, []string{"SPOP", "s"}), sets: []string{"s"}},
		{name: "SMOVE", run: cmds([]string{"SADD", "s", "a", "b", "c"}, []string{"SADD", "t", "x"}, []string{"SMOVE", "s", "t", "a"}, []string{"SMOVE", "s", "n", "b"}),
			sets: []string{"s", "t", "n"}},
		{name: "SINTERSTORE SUNIONSTORE", run: cmds([]string{"SADD", "s", "a", "b", "c"}, []string{"SADD", "t", "b", "c", "d"},
			[]string{"SINTERSTORE", "i", "s", "t"}, []string{"SUNIONSTORE", "u", "s", "t"}), sets: []string{"s", "t", "i", "u"}},
		{name: "RESTORE and RENAME", run: func(t *testing.T, s *Server) {
			pipeline(t, s, []string{"SADD", "s", "a", "b", "c"})
			raw := strings.TrimPrefix(pipeline(t, s, []string{"DUMP", "s"})[0], "$")
			eqReplies(t, pipeline(t, s, []string{"RESTORE", "r", "0", raw}, []string{"RENAME", "s", "m"}, []string{"SREM", "m", "a"}), []string{"+OK", "+OK", ":1"})
		}, sets: []string{"r", "m"}},
		{name: "MULTI and EVAL", run: cmds([]string{"MULTI"}, []string{"SADD", "s", "a", "b", "c"}, []string{"SREM", "s", "a"}, []string{"ZADD", "z", "1", "a", "2", "b", "3", "c"},
			[]string{"ZPOPMIN", "z"}, []string{"EXEC"}, []string{"EVAL", "redis.call('SADD', KEYS[1], 'x', 'y'); redis.call('SREM', KEYS[1], 'x'); return redis.call('ZPOPMIN', KEYS[2])", "2", "t", "z"}),
			sets: []string{"s", "t"}, zsets: []string{"z"}, hinted: []string{"z"}},
		{name: "small set written before", older: map[string][]string{"s": {"1", "2", "3"}, "t": {"1", "2"}, "u": {"1", "2", "3"}},
			run: cmds([]string{"SADD", "s", "4"}, []string{"SREM", "t", "1"}, []string{"SPOP", "u"}), sets: []string{"s", "t", "u"}},
		{name: "ZPOPMIN", run: cmds([]string{"ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"}, []string{"ZPOPMIN", "z"},
			[]string{"ZADD", "z", "0", "x", "5", "e"}, []string{"ZPOPMIN", "z", "2"}, []string{"ZINCRBY", "z", "1", "c"}),
			zsets: []string{"z"}, hinted: []string{"z"}},
		{name: "BZPOPMIN ZMPOP ZREMRANGEBYSCORE", run: cmds([]string{"ZADD", "z", "1", "a", "2", "b", "3", "c"}, []string{"ZADD", "y", "1", "a", "2", "b", "3", "c"},
			[]string{"ZADD", "w", "1", "a", "2", "b", "3", "c"}, []string{"BZPOPMIN", "z", "0"}, []string{"ZMPOP", "1", "y", "MIN"},
			[]string{"ZREMRANGEBYSCORE", "w", "-inf", "1"}, []string{"ZPOPMAX", "w"}),
			zsets: []string{"z", "y", "w"}, hinted: []string{"z", "y"}},
	}
	for _, r := range rows {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/open=%v", r.name, open), func(t *testing.T) {
				kv := newFakeKV()
				kv.olderLayouts.Store(!open)
				s, _ := start(t, kv, nil, nil)
				for k, ms := range r.older {
					legacySet(kv, k, ms...)
				}
				r.run(t, s)
				for _, k := range r.sets {
					if !open {
						checkOlderSet(t, s, kv, k)
						continue
					}
					eq(t, isNumbered(t, kv, k), true)
					checkPositions(t, kv, k)
				}
				for _, z := range r.zsets {
					switch {
					case !open:
						checkOlderZSet(t, s, kv, z)
					case strings.Contains(strings.Join(r.hinted, " "), z):
						eq(t, zHasHint(kv, z), true)
					}
				}
			})
		}
	}
}

// A numbered set and a sorted set with a start hint exist only once the
// cluster reached log version 13, and a node may learn it later than
// another: one that has not yet keeps them as they are, positions in step
// and the hint right, where dropping the numbering would lose it.
func TestLayoutsFoundKeptBeforeTheGate(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	pipeline(t, s, []string{"SADD", "s", "a", "b", "c", "d", "e"}, []string{"ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"},
		[]string{"ZPOPMIN", "z"})
	eq(t, zHasHint(kv, "z"), true)
	kv.olderLayouts.Store(true)
	reps := pipeline(t, s, []string{"SREM", "s", "b"}, []string{"SADD", "s", "f", "g"}, []string{"SMOVE", "s", "n", "a"}, []string{"SPOP", "s", "2"},
		[]string{"SCARD", "s"}, []string{"ZPOPMIN", "z"}, []string{"ZADD", "z", "0", "x"}, []string{"ZRANGE", "z", "0", "-1"}, []string{"ZPOPMIN", "z", "2"})
	eq(t, len(bulks(reps[3])), 2)
	eqReplies(t, append(reps[:3], reps[4:]...), []string{":1", ":2", ":1", ":3", "*[$b $2]", ":1", "*[$x $c $d]", "*[$x $0 $c $3]"})
	eq(t, isNumbered(t, kv, "s"), true)
	checkPositions(t, kv, "s")
	// The member SMOVE moved made a new set: no positions.
	checkOlderSet(t, s, kv, "n")
	eq(t, zHasHint(kv, "z"), true)
	eqReplies(t, pipeline(t, s, []string{"ZRANGE", "z", "0", "-1"}, []string{"ZADD", "z", "-1", "y"}, []string{"ZRANGE", "z", "0", "-1"}),
		[]string{"*[$d]", ":1", "*[$y $d]"})
}

// No stream is created before the gate opens (an older front end reads
// its metadata as a string); one created after it keeps working at a node
// that has not learnt the version yet.
func TestStreamsWaitForTheGate(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	dump := pipeline(t, s, []string{"XADD", "d", "1-1", "f", "v"}, []string{"DUMP", "d"})[1]
	kv.olderLayouts.Store(true)
	reps := pipeline(t, s, []string{"XADD", "s", "*", "f", "v"}, []string{"RESTORE", "r", "0", dump[1:]}, []string{"TYPE", "s"}, []string{"TYPE", "r"},
		[]string{"XADD", "d", "2-1", "g", "w"}, []string{"XLEN", "d"})
	eqReplies(t, reps, []string{"-" + errStreamsUpgrading, "-" + errStreamsUpgrading, "+none", "+none", "$2-1", ":2"})
	kv.olderLayouts.Store(false)
	eqReplies(t, pipeline(t, s, []string{"XADD", "s", "1-1", "f", "v"}, []string{"TYPE", "s"}), []string{"$1-1", "+stream"})
}
