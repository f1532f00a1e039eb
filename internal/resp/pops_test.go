package resp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// checkPositions checks the member positions of set k (sets.go) in f's
// store: positions 0..count-1 each name a member whose value is that
// position, and every member has one.
func checkPositions(t *testing.T, f *fakeKV, k string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[k]
	if !ok {
		return // no set: its keys are garbage
	}
	m, ok := decodeMeta(setMarker, v)
	if !ok {
		t.Fatalf("%s: no set metadata", k)
	}
	members, pos := elemPrefix([]byte(k), m.gen), elemPrefix([]byte(k), posGen(m.gen))
	n := 0
	for key, v := range f.m {
		if !strings.HasPrefix(key, string(members)) {
			continue
		}
		n++
		p := binary.BigEndian.Uint64(v)
		if at := f.m[string(binary.BigEndian.AppendUint64(bytes.Clone(pos), p))]; string(at) != key[len(members):] {
			t.Fatalf("%s: member %q at position %d, which holds %q", k, key[len(members):], p, at)
		}
	}
	if uint64(n) != m.a {
		t.Fatalf("%s: %d members, count %d", k, n, m.a)
	}
	for key := range f.m {
		if strings.HasPrefix(key, string(pos)) && binary.BigEndian.Uint64([]byte(key[len(pos):])) >= m.a {
			t.Fatalf("%s: position %d past the count %d", k, binary.BigEndian.Uint64([]byte(key[len(pos):])), m.a)
		}
	}
}

// An SPOP of a set larger than MaxBatchKeys reads positions, not a scan:
// no pop scans or steps over the deletions of the pops before it, and the
// members popped and left are the set's.
func TestSPopLargeSetScansNothing(t *testing.T) {
	kv := newFakeKV()
	kv.keepTombs()
	s, _ := start(t, kv, nil, nil)
	const n = 3000
	all := map[string]bool{}
	for i := 0; i < n; i += 500 {
		cmd := []string{"SADD", "s"}
		for j := i; j < i+500; j++ {
			cmd = append(cmd, "element:"+strconv.Itoa(j))
			all["element:"+strconv.Itoa(j)] = true
		}
		pipeline(t, s, cmd)
	}
	var pops [][]string
	for range n / 2 {
		pops = append(pops, []string{"SPOP", "s"})
	}
	scans := kv.scans
	var reps []string
	stepped := kv.steps(func() { reps = pipeline(t, s, pops...) })
	if kv.scans != scans || stepped != 0 {
		t.Fatalf("%d SPOPs: %d scans, %d deletions stepped over", len(pops), kv.scans-scans, stepped)
	}
	popped := map[string]bool{}
	for _, r := range reps {
		r = strings.TrimPrefix(r, "$")
		if !all[r] || popped[r] {
			t.Fatalf("SPOP answered %q: not a member, or popped twice", r)
		}
		popped[r] = true
	}
	checkPositions(t, kv, "s")
	left := bulks(pipeline(t, s, []string{"SMEMBERS", "s"})[0])
	for _, m := range left {
		if popped[m] {
			t.Fatalf("%s popped and still a member", m)
		}
	}
	eq(t, len(left)+len(popped), n)
	reps = pipeline(t, s, []string{"SPOP", "s", "1000"}, []string{"SCARD", "s"})
	eq(t, len(bulks(reps[0])), 1000)
	eq(t, reps[1], ":500")
	checkPositions(t, kv, "s")
}

// bulks is the bulk strings of an array reply as pipeline gives it.
func bulks(rep string) []string {
	out := strings.Fields(strings.Trim(rep, "*[]"))
	for i := range out {
		out[i] = strings.TrimPrefix(out[i], "$")
	}
	return out
}

// SADD, SREM, SPOP and SMOVE in random order keep the positions whole,
// and SRANDMEMBER of a set larger than MaxBatchKeys draws uniformly.
func TestSetPositionsKept(t *testing.T) {
	kv := newFakeKV()
	r := rand.New(rand.NewPCG(37, 2))
	s, _ := start(t, kv, func(c *Config) { c.MaxBatchKeys = 4; c.randN = r.IntN }, nil)
	for range 400 {
		k, o := "a", "b"
		if r.IntN(2) == 0 {
			k, o = o, k
		}
		m := strconv.Itoa(r.IntN(12))
		switch r.IntN(4) {
		case 0, 1:
			pipeline(t, s, []string{"SADD", k, m, strconv.Itoa(r.IntN(12))})
		case 2:
			pipeline(t, s, []string{"SREM", k, m, strconv.Itoa(r.IntN(12))})
		default:
			pipeline(t, s, []string{"SMOVE", k, o, m})
		}
		checkPositions(t, kv, "a")
		checkPositions(t, kv, "b")
	}
	pipeline(t, s, []string{"DEL", "u"}, []string{"SADD", "u", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"})
	counts := map[string]int{}
	for _, rep := range pipeline(t, s, []string{"SRANDMEMBER", "u", "-5000"}) {
		for _, m := range bulks(rep) {
			counts[m]++
		}
	}
	if x := chiSquare(counts, 10); x > 27.88 {
		t.Fatalf("SRANDMEMBER u -5000: chi-square %.1f: %v", x, counts)
	}
	reps := pipeline(t, s, []string{"SPOP", "u", "3"}, []string{"SCARD", "u"})
	eq(t, len(bulks(reps[0])), 3)
	eq(t, reps[1], ":7")
	checkPositions(t, kv, "u")
}

// TestZPopMinStepsNoDeletions: after many ZPOPMINs, the next pop and a
// range from the start begin at the start hint the pops wrote, so they
// step over none of the deletions the pops left (an MVCC store's
// tombstones until GC); a member added below the hint, alone or in the
// same transaction as pops, is still the first.
func TestZPopMinStepsNoDeletions(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, nil, nil)
	for i := 0; i < 1000; i += 500 {
		cmd := []string{"ZADD", "z"}
		for j := i; j < i+500; j++ {
			cmd = append(cmd, strconv.Itoa(j), "m"+strconv.Itoa(j))
		}
		pipeline(t, s, cmd)
	}
	kv.keepTombs()
	var pops [][]string
	for range 500 {
		pops = append(pops, []string{"ZPOPMIN", "z"})
	}
	pipeline(t, s, pops...)
	var reps []string
	stepped := kv.steps(func() {
		reps = pipeline(t, s, []string{"ZPOPMIN", "z"}, []string{"ZRANGE", "z", "0", "0"},
			[]string{"ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "1"}, []string{"ZPOPMIN", "z", "2"})
	})
	eqReplies(t, reps, []string{"*[$m500 $500]", "*[$m501]", "*[$m501]", "*[$m501 $501 $m502 $502]"})
	eq(t, stepped, 0)

	eqReplies(t, pipeline(t, s,
		[]string{"ZADD", "z", "-5", "low"}, []string{"ZRANGE", "z", "0", "1"},
		[]string{"ZADD", "z", "-10", "m900"}, []string{"ZPOPMIN", "z"}, []string{"ZPOPMIN", "z"},
		[]string{"MULTI"}, []string{"ZPOPMIN", "z"}, []string{"ZADD", "z", "-1", "x"}, []string{"ZPOPMIN", "z"}, []string{"ZRANK", "z", "m505"}, []string{"EXEC"},
		[]string{"ZCARD", "z"}),
		[]string{":1", "*[$low $m503]", ":0", "*[$m900 $-10]", "*[$low $-5]", "+OK", "+QUEUED", "+QUEUED", "+QUEUED", "+QUEUED", "*[*[$m503 $503] :1 *[$x $-1] :1]", ":495"})
	members := bulks(pipeline(t, s, []string{"ZRANGE", "z", "0", "-1"})[0])
	if !slices.Equal(members[:2], []string{"m504", "m505"}) || len(members) != 495 {
		t.Fatalf("ZRANGE z 0 -1: %v...", members[:3])
	}
}

// nthScanKV runs hook before its at-th Scan.
type nthScanKV struct {
	*fakeKV
	n, at atomic.Int32
	hook  func()
}

func (k *nthScanKV) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	if k.n.Add(1) == k.at.Load() {
		k.hook()
	}
	return k.fakeKV.Scan(ctx, start, end, limit)
}

// TestDelRecordsItsSpanClean: a DEL whose clearing takes several batches
// records the span clean, so that a ZADD or HSET of the same front end
// making the key anew steps over none of the deletions it left (on main
// the read of the span outside the transaction stepped over all 600);
// another front end (another node's) reads the span as before. A set
// made and expired at the key while the clearing ran, its member left
// where the clearing had passed, is not taken for clean.
func TestDelRecordsItsSpanClean(t *testing.T) {
	kv := &nthScanKV{fakeKV: newFakeKV()}
	mod := func(c *Config) { c.Now, c.MaxBatchKeys = kv.clock.Now, 100 }
	s, _ := start(t, kv, mod, nil)
	other, _ := start(t, kv, mod, nil)
	fill := func(k string) {
		cmd := []string{"ZADD", k}
		for j := range 300 {
			cmd = append(cmd, strconv.Itoa(j), "m"+strconv.Itoa(j))
		}
		eqReplies(t, pipeline(t, s, cmd), []string{":300"})
	}
	kv.keepTombs()
	for _, k := range []string{"z", "h", "o"} {
		fill(k)
	}
	eqReplies(t, pipeline(t, s, []string{"DEL", "z"}, []string{"DEL", "h", "o"}), []string{":1", ":2"})
	eq(t, kv.steps(func() {
		eqReplies(t, pipeline(t, s, []string{"ZADD", "z", "1", "a"}, []string{"HSET", "h", "f", "v"}), []string{":1", ":1"})
	}), 0)
	eq(t, kv.steps(func() { eqReplies(t, pipeline(t, other, []string{"ZADD", "o", "1", "a"}), []string{":1"}) }), 600)
	eqReplies(t, pipeline(t, s, []string{"ZRANGE", "z", "0", "-1"}, []string{"HGETALL", "h"}, []string{"ZRANGE", "o", "0", "-1"}),
		[]string{"*[$a]", "*[$f $v]", "*[$a]"})

	fill("r")
	kv.n.Store(0)
	kv.at.Store(3) // the clearing's third scan: after its first batch's deletes
	kv.hook = func() {
		eqReplies(t, pipeline(t, s, []string{"ZADD", "r", "5", "a"}, []string{"PEXPIRE", "r", "1"}), []string{":1", ":1"})
		kv.clock.Advance(time.Second)
	}
	eqReplies(t, pipeline(t, s, []string{"DEL", "r"}), []string{":1"})
	eqReplies(t, pipeline(t, s, []string{"ZADD", "r", "1", "b"}, []string{"ZRANGE", "r", "0", "-1", "WITHSCORES"}, []string{"ZCARD", "r"},
		[]string{"ZSCORE", "r", "a"}), []string{":1", "*[$b $1]", ":1", "$<nil>"})
}

// slowScanKV's scans each take a second of its clock; it records, for each
// guarded write, whether its context carries its command's arrival
// (Arrival) and its deadline.
type slowScanKV struct {
	*fakeKV
	arrived   []bool
	deadlines []time.Time
}

func (k *slowScanKV) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	k.clock.Advance(time.Second)
	return k.fakeKV.Scan(ctx, start, end, limit)
}

func (k *slowScanKV) GuardedWrite(ctx context.Context, ops []Op, g Guard) (GuardResult, error) {
	d, _ := ctx.Deadline()
	k.arrived, k.deadlines = append(k.arrived, !Arrival(ctx).IsZero()), append(k.deadlines, d)
	return k.fakeKV.GuardedWrite(ctx, ops, g)
}

// TestClearingBatchesAreRequestsOfTheirOwn: each write clearing a span (a
// DEL's, batch after batch, and a ZADD's over an earlier set's leftovers
// after its read of the span) has a request's time of its own, and
// admission does not measure it from its command's arrival. On main they
// shared their command's deadline, so a DEL of 38,000 members in two
// ranges ran out of its 5 s (ERR ambiguous result), and each was measured
// as having waited for the scans and batches before it: a node at load 8
// took a DEL for an overload and refused its clearing midway (TRYAGAIN,
// the key gone and its members left).
func TestClearingBatchesAreRequestsOfTheirOwn(t *testing.T) {
	kv := &slowScanKV{fakeKV: newFakeKV()}
	s, _ := start(t, kv, func(c *Config) { c.Now, c.MaxBatchKeys = kv.clock.Now, 100 }, nil)
	cmd := []string{"ZADD", "z"}
	for j := range 300 {
		cmd = append(cmd, strconv.Itoa(j), "m"+strconv.Itoa(j))
	}
	eqReplies(t, pipeline(t, s, cmd, []string{"DEL", "z"}), []string{":300", ":1"})
	eq(t, fmt.Sprint(kv.arrived), "[false false false false false false]")
	for i := 1; i < len(kv.deadlines); i++ {
		if !kv.deadlines[i].After(kv.deadlines[i-1]) {
			t.Fatalf("clearing batches' deadlines %v: not each its own", kv.deadlines)
		}
	}

	kv.arrived = nil
	eqReplies(t, pipeline(t, s, cmd, []string{"PEXPIRE", "z", "1"}), []string{":300", ":1"})
	kv.clock.Advance(time.Second)
	eqReplies(t, pipeline(t, s, []string{"ZADD", "z", "1", "a"}, []string{"ZRANGE", "z", "0", "-1"}), []string{":1", "*[$a]"})
	eq(t, fmt.Sprint(kv.arrived), "[false]")
}

// TestZAddAfterDelScansOutside: a ZADD making a sorted set where one of
// 1,000 members was just deleted does not scan the span in its
// transaction (whose commit would check the span's deletions again on
// every replica): it reads the span outside first, once for the commands
// queued with it. Where an earlier set's members are left (it expired),
// they are still cleared.
func TestZAddAfterDelScansOutside(t *testing.T) {
	kv := newFakeKV()
	s, _ := start(t, kv, func(c *Config) { c.Now = kv.clock.Now }, nil)
	cmd := []string{"ZADD", "z"}
	for j := range 1000 {
		cmd = append(cmd, strconv.Itoa(j), "m"+strconv.Itoa(j))
	}
	pipeline(t, s, cmd, []string{"DEL", "z"})
	txScans := kv.txScans
	eqReplies(t, pipeline(t, s, []string{"ZADD", "z", "1", "a"}, []string{"ZADD", "z", "2", "b"}, []string{"ZRANGE", "z", "0", "-1"}),
		[]string{":1", ":1", "*[$a $b]"})
	eq(t, kv.txScans-txScans, 0)

	eqReplies(t, pipeline(t, s, []string{"ZADD", "g", "1", "a", "2", "b"}, []string{"PEXPIRE", "g", "1"}), []string{":2", ":1"})
	kv.clock.Advance(time.Second)
	eqReplies(t, pipeline(t, s, []string{"ZADD", "g", "3", "c"}, []string{"ZRANGE", "g", "0", "-1"}, []string{"HSET", "g", "f", "v"}),
		[]string{":1", "*[$c]", "-WRONGTYPE Operation against a key holding the wrong kind of value"})
	eqReplies(t, pipeline(t, s, []string{"PEXPIRE", "g", "1"}), []string{":1"})
	kv.clock.Advance(time.Second)
	eqReplies(t, pipeline(t, s, []string{"HSET", "g", "f", "v"}, []string{"HGETALL", "g"}), []string{":1", "*[$f $v]"})
}
