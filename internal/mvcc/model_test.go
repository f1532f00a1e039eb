package mvcc

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/enginetest"
)

var (
	modelSeed  = flag.Uint64("mvcc-seed", 1, "first random seed of TestAgainstModel")
	modelSeeds = flag.Int("mvcc-seeds", 3, "how many seeds TestAgainstModel runs per engine")
	modelSteps = flag.Int("mvcc-steps", 3000, "random operations per seed of TestAgainstModel")
)

// engineKinds are the engines the model test runs against.
var engineKinds = []enginetest.Kind{
	enginetest.Mem,
	enginetest.Pebble,
	{Name: "memengine", New: func(tb testing.TB) storage.Engine {
		e, err := memengine.New(memengine.DefaultConfig())
		if err != nil {
			tb.Fatal(err)
		}
		return e
	}},
}

// mversion is a version in the model.
type mversion struct {
	ts    hlc.Timestamp
	value string
	tomb  bool
}

// model holds each key's versions, newest first.
type model map[string][]mversion

func (m model) write(key string, v mversion) {
	vs := slices.DeleteFunc(m[key], func(o mversion) bool { return o.ts == v.ts })
	i, _ := slices.BinarySearchFunc(vs, v.ts, func(o mversion, t hlc.Timestamp) int { return t.Compare(o.ts) })
	m[key] = slices.Insert(vs, i, v)
}

// read is the newest version at or below ts (zero: none).
func (m model) read(key string, ts hlc.Timestamp) mversion {
	for _, v := range m[key] {
		if !ts.Less(v.ts) {
			return v
		}
	}
	return mversion{}
}

func (m model) sortedKeys() []string { return slices.Sorted(maps.Keys(m)) }

func (m model) scan(start, end string, ts hlc.Timestamp) []KeyValue {
	var out []KeyValue
	for _, k := range m.sortedKeys() {
		if k < start || (end != "" && k >= end) {
			continue
		}
		if v := m.read(k, ts); !v.ts.IsZero() && !v.tomb {
			out = append(out, KeyValue{Key: []byte(k), Value: []byte(v.value), Timestamp: v.ts})
		}
	}
	return out
}

// gc applies GC's rule: per key, keep the versions above safePoint and the
// newest at or below it unless it is a tombstone.
func (m model) gc(safePoint hlc.Timestamp) {
	for k, vs := range m {
		for i, v := range vs {
			if safePoint.Less(v.ts) {
				continue
			}
			keep := i + 1
			if v.tomb {
				keep = i
			}
			vs = vs[:keep]
			break
		}
		if len(vs) == 0 {
			delete(m, k)
		} else {
			m[k] = vs
		}
	}
}

func (m model) clone() model {
	c := model{}
	for k, vs := range m {
		c[k] = slices.Clone(vs)
	}
	return c
}

func (m model) stats() Stats {
	var st Stats
	for k, vs := range m {
		if !vs[0].tomb {
			st.LiveKeys++
			st.LiveBytes += int64(len(k) + len(vs[0].value))
		}
		for _, v := range vs {
			st.Versions++
			st.TotalBytes += int64(len(AppendKey(nil, []byte(k), v.ts)) + headerLen + len(v.value))
		}
	}
	return st
}

// TestAgainstModel drives each engine and two models with the same seeded
// random puts, deletes, reads and scans at random timestamps and GCs at
// random safe points. The full model never collects, so reads at or above
// the GC threshold must match it whatever GC removed; the collected model
// applies GC's rule, so the engine must hold exactly its versions.
func TestAgainstModel(t *testing.T) {
	for _, k := range engineKinds {
		for seed := *modelSeed; seed < *modelSeed+uint64(*modelSeeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", k.Name, seed), func(t *testing.T) {
				runModel(t, k, seed, *modelSteps)
			})
		}
	}
}

type modelRun struct {
	t         *testing.T
	kind      enginetest.Kind
	e         storage.Engine
	rng       *rand.Rand
	full, gcd model
	threshold hlc.Timestamp // the highest safe point collected
	counts    map[string]int
}

func runModel(t *testing.T, k enginetest.Kind, seed uint64, steps int) {
	r := &modelRun{t: t, kind: k, e: k.Open(t), rng: rand.New(rand.NewPCG(seed, 15)),
		full: model{}, gcd: model{}, threshold: hlc.Timestamp{WallTime: 0}, counts: map[string]int{}}
	for step := range steps {
		switch n := r.rng.IntN(100); {
		case n < 35:
			r.writeBatch(step, false)
		case n < 45:
			r.writeBatch(step, true)
		case n < 70:
			r.checkGet(step, r.readTS())
		case n < 85:
			r.checkScan(step)
		case n < 87:
			r.collect(step)
		case n < 96:
			r.checkStats(step)
		case n < 98:
			r.checkSplitKey(step)
		default:
			if k.Flush != nil {
				k.Flush(t, r.e)
				r.counts["flush"]++
			}
		}
	}
	r.collect(steps)
	r.checkStats(steps)
	t.Logf("ops: %v; %d keys, %d versions left", r.counts, len(r.gcd), r.gcd.stats().Versions)
	// A test that never collected anything, or never saw a tombstone hide
	// a value, proves little.
	for _, what := range []string{"gc-removed", "get-tombstone", "get-found", "get-below-newest", "scan-page"} {
		if r.counts[what] == 0 {
			t.Errorf("the run never exercised %s", what)
		}
	}
	if r.counts["most-versions"] < 5 {
		t.Errorf("no key read had more than %d versions", r.counts["most-versions"])
	}
}

var alphabet = []string{"a", "b", "\x00", "\xff", "\x00\x01", "ab"}

func (r *modelRun) key() string {
	s := ""
	for range r.rng.IntN(3) + 1 {
		s += alphabet[r.rng.IntN(len(alphabet))]
	}
	return s
}

// writeTS is above the GC threshold (writes at or below it are refused
// by the layer above) and often below the newest version of the key.
func (r *modelRun) writeTS() hlc.Timestamp {
	for {
		ts := hlc.Timestamp{WallTime: r.threshold.WallTime + int64(r.rng.IntN(40)), Logical: uint32(r.rng.IntN(3))}
		if r.threshold.Less(ts) {
			return ts
		}
	}
}

// readTS is at or above the GC threshold, sometimes exactly on it, and
// sometimes above everything.
func (r *modelRun) readTS() hlc.Timestamp {
	switch r.rng.IntN(6) {
	case 0:
		return r.threshold
	case 1:
		return hlc.MaxTimestamp
	}
	ts := hlc.Timestamp{WallTime: r.threshold.WallTime + int64(r.rng.IntN(45)), Logical: uint32(r.rng.IntN(3))}
	if ts.Less(r.threshold) {
		return r.threshold
	}
	return ts
}

func (r *modelRun) writeBatch(step int, del bool) {
	b := r.e.NewBatch()
	defer b.Close()
	for range r.rng.IntN(3) + 1 {
		k, ts := r.key(), r.writeTS()
		v := mversion{ts: ts, tomb: del}
		var err error
		if del {
			err = Delete(b, []byte(k), ts)
			r.counts["delete"]++
		} else {
			if r.rng.IntN(5) > 0 { // else the empty value, which is not a delete
				v.value = fmt.Sprintf("v%d", step)
			}
			err = Put(b, []byte(k), ts, []byte(v.value))
			r.counts["put"]++
		}
		if err != nil {
			r.t.Fatalf("step %d: write %q@%s: %v", step, k, ts, err)
		}
		r.full.write(k, v)
		r.gcd.write(k, v)
	}
	if err := b.Commit(false); err != nil {
		r.t.Fatal(err)
	}
}

func (r *modelRun) checkGet(step int, ts hlc.Timestamp) {
	r.t.Helper()
	k := r.key()
	got, err := Get(r.e, []byte(k), ts)
	if err != nil {
		r.t.Fatalf("step %d: Get(%q, %s): %v", step, k, ts, err)
	}
	want := r.full.read(k, ts)
	same := got.Timestamp == want.ts && got.Tombstone == want.tomb && string(got.Value) == want.value
	// GC may remove a tombstone at or below its safe point: the read
	// then finds nothing, which a reader cannot tell from the tombstone.
	collected := want.tomb && !r.threshold.Less(want.ts) && got.Timestamp.IsZero() && !got.Tombstone && got.Value == nil
	if !(same || collected) || got.Found() != (!want.ts.IsZero() && !want.tomb) {
		r.t.Fatalf("step %d: Get(%q, %s) = %+v, model has %+v (GC threshold %s)", step, k, ts, got, want, r.threshold)
	}
	switch {
	case want.tomb:
		r.counts["get-tombstone"]++
	case got.Found():
		r.counts["get-found"]++
		if vs := r.full[k]; ts.Less(vs[0].ts) {
			r.counts["get-below-newest"]++
		}
	}
	if n := len(r.gcd[k]); n > r.counts["most-versions"] {
		r.counts["most-versions"] = n
	}
}

func (r *modelRun) checkScan(step int) {
	start, end := r.key(), ""
	if r.rng.IntN(3) == 0 {
		start = ""
	}
	if r.rng.IntN(2) == 0 {
		end = r.key()
		if end < start {
			start, end = end, start
		}
	}
	ts := r.readTS()
	limit, maxBytes := r.rng.IntN(5)+1, r.rng.IntN(12)+1
	var got []KeyValue
	for from := start; ; r.counts["scan-page"]++ {
		page, resume, err := Scan(r.e, []byte(from), []byte(end), ts, limit, maxBytes)
		if err != nil {
			r.t.Fatalf("step %d: Scan(%q, %q, %s): %v", step, from, end, ts, err)
		}
		if len(page) > limit {
			r.t.Fatalf("step %d: Scan page of %d keys over the limit %d", step, len(page), limit)
		}
		size := 0
		for i, kv := range page {
			if size >= maxBytes {
				r.t.Fatalf("step %d: Scan went on to key %d after %d bytes with a budget of %d", step, i, size, maxBytes)
			}
			size += len(kv.Key) + len(kv.Value)
		}
		got = append(got, page...)
		if resume == nil {
			break
		}
		if string(resume) <= from || (len(page) > 0 && string(resume) <= string(page[len(page)-1].Key)) {
			r.t.Fatalf("step %d: Scan from %q resumes at %q, not after what it returned", step, from, resume)
		}
		from = string(resume)
	}
	want := r.full.scan(start, end, ts)
	if !kvsEqual(got, want) {
		r.t.Fatalf("step %d: Scan(%q, %q, %s) limit %d bytes %d =\n%s\nmodel:\n%s", step, start, end, ts, limit, maxBytes, fmtKVs(got), fmtKVs(want))
	}
}

// collect runs GC to a safe point in budgeted calls, checking between calls
// that reads at or above the safe point are unchanged, then that the engine
// holds exactly the collected model.
func (r *modelRun) collect(step int) {
	// Small steps, so keys keep several versions above the safe point.
	sp := hlc.Timestamp{WallTime: r.threshold.WallTime + int64(r.rng.IntN(8)), Logical: uint32(r.rng.IntN(3))}
	if sp.Less(r.threshold) {
		sp = r.threshold
	}
	budget := r.rng.IntN(6) + 1
	start, end := "", ""
	if r.rng.IntN(2) == 0 {
		start = r.key()
	}
	r.threshold = sp
	for from := []byte(start); ; {
		b := r.e.NewBatch()
		resume, st, err := GC(r.e, b, from, []byte(end), sp, budget)
		if err != nil {
			r.t.Fatalf("step %d: GC(%q, %s): %v", step, from, sp, err)
		}
		if err := b.Commit(false); err != nil {
			r.t.Fatal(err)
		}
		b.Close()
		r.counts["gc-removed"] += st.Versions
		for range 3 {
			r.checkGet(step, r.readTS())
		}
		if resume == nil {
			break
		}
		if st.Keys == 0 || bytes.Compare(resume, from) < 0 || (st.Versions == 0 && bytes.Equal(resume, from)) {
			r.t.Fatalf("step %d: GC from %q made no progress: resume %q, %+v", step, from, resume, st)
		}
		from = resume
	}
	// Only the collected span's keys lose versions.
	before := r.gcd.clone()
	r.gcd.gc(sp)
	for k, vs := range before {
		if k < start {
			r.gcd[k] = vs
		}
	}
	r.checkContents(step)
}

// checkContents compares every stored version with the collected model.
func (r *modelRun) checkContents(step int) {
	it, err := r.e.NewIter(nil, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	defer it.Close()
	got := model{}
	var order []string
	for ok := it.First(); ok; ok = it.Next() {
		k, ts, err := DecodeKey(it.Key())
		if err != nil {
			r.t.Fatalf("step %d: %v", step, err)
		}
		val, tomb, err := decodeValue(it.Value())
		if err != nil {
			r.t.Fatalf("step %d: %v", step, err)
		}
		got[string(k)] = append(got[string(k)], mversion{ts: ts, value: string(val), tomb: tomb})
		order = append(order, fmt.Sprintf("%q@%s", k, ts))
	}
	if fmt.Sprint(got) != fmt.Sprint(r.gcd) {
		r.t.Fatalf("step %d: after GC to %s the engine holds\n%v\nthe collected model\n%v", step, r.threshold, got, r.gcd)
	}
	// The engine's order is the model's: keys ascending, newest first.
	var want []string
	for _, k := range r.gcd.sortedKeys() {
		for _, v := range r.gcd[k] {
			want = append(want, fmt.Sprintf("%q@%s", k, v.ts))
		}
	}
	if !slices.Equal(order, want) {
		r.t.Fatalf("step %d: engine order\n%v\nwant\n%v", step, order, want)
	}
}

func (r *modelRun) checkStats(step int) {
	got, err := ComputeStats(r.e, nil, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	if want := r.gcd.stats(); got != want {
		r.t.Fatalf("step %d: ComputeStats = %+v, model %+v", step, got, want)
	}
}

// checkSplitKey: with fewer keys than SplitKey keeps checkpoints, it picks
// exactly the key boundary nearest the middle of the bytes.
func (r *modelRun) checkSplitKey(step int) {
	got, err := SplitKey(context.Background(), r.e, nil, nil)
	keys := r.gcd.sortedKeys()
	if len(keys) < 2 {
		if err == nil {
			r.t.Fatalf("step %d: SplitKey of %d keys = %q, want an error", step, len(keys), got)
		}
		return
	}
	if err != nil {
		r.t.Fatalf("step %d: SplitKey: %v", step, err)
	}
	var total int64
	before := map[string]int64{}
	for _, k := range keys {
		before[k] = total
		for _, v := range r.gcd[k] {
			total += int64(len(AppendKey(nil, []byte(k), v.ts)) + headerLen + len(v.value))
		}
	}
	best := keys[1]
	dist := func(k string) int64 { return max(before[k]-total/2, total/2-before[k]) }
	for _, k := range keys[2:] {
		if dist(k) < dist(best) {
			best = k
		}
	}
	if string(got) != best {
		r.t.Fatalf("step %d: SplitKey = %q, want %q (bytes before it %d of %d)", step, got, best, before[best], total)
	}
	r.counts["split-key"]++
}

func kvsEqual(a, b []KeyValue) bool {
	return slices.EqualFunc(a, b, func(x, y KeyValue) bool {
		return bytes.Equal(x.Key, y.Key) && bytes.Equal(x.Value, y.Value) && x.Timestamp == y.Timestamp
	})
}

func fmtKVs(kvs []KeyValue) string {
	var b bytes.Buffer
	for _, kv := range kvs {
		fmt.Fprintf(&b, "  %q@%s = %q\n", kv.Key, kv.Timestamp, kv.Value)
	}
	return b.String()
}
