package memengine

import (
	"math/rand/v2"
	"testing"
)

func (f *countingBloom) countersOf(h uint64) []byte {
	var cs []byte
	for j := range f.k {
		cs = append(cs, f.counter(f.position(h, j)))
	}
	return cs
}

func TestCountingBloomCountsUpAndDown(t *testing.T) {
	f := newCountingBloom(1<<10, 3)
	const h = 0x1234_5678_9abc_def0
	if f.mayContain(h) {
		t.Fatal("an empty filter says maybe")
	}
	for range 3 {
		f.add(h)
	}
	for _, c := range f.countersOf(h) {
		if c != 3 {
			t.Fatalf("counters after 3 adds: %v", f.countersOf(h))
		}
	}
	f.remove(h)
	f.remove(h)
	if !f.mayContain(h) {
		t.Fatal("a key added 3 times and removed twice is not a maybe")
	}
	f.remove(h)
	if f.mayContain(h) {
		t.Fatal("a key added and removed as often says maybe")
	}
	// Neighbouring counters in a byte do not disturb each other.
	for i := range uint64(16) {
		f.setCounter(i, byte(i))
	}
	for i := range uint64(16) {
		if f.counter(i) != byte(i) {
			t.Fatalf("counter %d reads %d", i, f.counter(i))
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("removing a key never added did not panic")
			}
		}()
		f.remove(0xdead)
	}()
}

func TestCountingBloomSaturatesWithoutFalseNegatives(t *testing.T) {
	f := newCountingBloom(1<<10, 2)
	const shared = 7 // 20 "keys" with one hash share every counter
	for range 20 {
		f.add(shared)
	}
	for _, c := range f.countersOf(shared) {
		if c != counterMax {
			t.Fatalf("counters after 20 adds: %v, want saturated at 15", f.countersOf(shared))
		}
	}
	// Removing 19 of them: the counters stay at 15, so the last is still
	// found. Counting down from 15 would have reached zero after 15
	// removals, with 5 keys present: false negatives.
	for range 19 {
		f.remove(shared)
	}
	if !f.mayContain(shared) {
		t.Fatal("a saturated counter underflowed: the remaining key reads as absent")
	}
	for _, c := range f.countersOf(shared) {
		if c != counterMax {
			t.Fatalf("a saturated counter moved: %v", f.countersOf(shared))
		}
	}
}

func TestCountingBloomFalsePositiveRate(t *testing.T) {
	const m, k, n = 1 << 16, 4, 4000
	f := newCountingBloom(m, k)
	rng := rand.New(rand.NewPCG(5, 6))
	for range n {
		f.add(rng.Uint64())
	}
	fp := 0
	const probes = 100000
	for range probes {
		if f.mayContain(rng.Uint64()) {
			fp++
		}
	}
	// (1 - e^(-kn/m))^k = 0.0024 here; the double hashing must stay close.
	if rate := float64(fp) / probes; rate > 0.005 {
		t.Fatalf("false-positive rate %.4f, want about 0.0024", rate)
	}
}

func TestCBFIndexSharesAHashAndSkipsTheStore(t *testing.T) {
	// A well-mixed hash: with a small one, all k positions would land on
	// counter 0 and saturate it.
	const shared = 0x9E3779B97F4A7C15
	x := newCBFIndex(1<<10, 3, hasher{raw: func([]byte) uint64 { return shared }})
	for i := range 5 {
		insertKey(x, ikey(i))
	}
	for i := range 5 {
		if e := x.get(ikey(i)); e == nil || string(e.key) != string(ikey(i)) {
			t.Fatalf("key %d among keys of one hash: %v", i, e)
		}
	}
	x.remove(x.get(ikey(2)))
	if x.get(ikey(2)) != nil || x.get(ikey(3)) == nil || len(x.store[shared]) != 4 {
		t.Fatal("removing one key of a shared hash")
	}
	for i := range 5 {
		if e := x.get(ikey(i)); e != nil {
			x.remove(e)
		}
	}
	if len(x.store) != 0 || x.filter.mayContain(shared) {
		t.Fatal("an emptied index still holds the hash")
	}

	// A key the filter rules out is answered without the store: plant an
	// entry in the store behind the filter's back and it stays unseen.
	x = newCBFIndex(1<<10, 3, hasher{raw: keyHash})
	planted := newEntry(hkey(77), version{1, []byte("v")})
	planted.hash = 77
	x.store[77] = []*entry{planted}
	if x.get(hkey(77)) != nil {
		t.Fatal("get probed the store for a key the filter rules out")
	}
}
