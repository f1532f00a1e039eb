package txncheck

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// simStore is a store that runs transactions one logical tick at a time,
// interleaving processes by a seeded choice, so that its histories are
// the same every run. Serial, each transaction takes effect at once at one
// tick between its invoke and complete: strictly serializable. Otherwise
// it is snapshot isolation: reads see the snapshot taken at invoke, and a
// transaction commits at complete unless another committed a write of
// one of its keys since (first committer wins), which allows write skew.
type simStore struct {
	w      Workload
	serial bool
	rng    *rand.Rand
	lists  map[string][]int
	regs   map[string]int
	// wrote is the tick each key was last committed at.
	wrote map[string]int
	next  int // the last value written
}

type simProc struct {
	id      int
	from    int // invoke tick; -1: idle
	mops    []Mop
	fail    bool // a serial transaction that will not take effect
	lost    bool // its answer is lost: Info
	applied bool
	lists   map[string][]int // the snapshot, with its own writes
	regs    map[string]int
}

func simulate(w Workload, serial bool, seed uint64, procs, txns int) []Txn {
	s := &simStore{w: w, serial: serial, rng: rand.New(rand.NewPCG(seed, 1)), lists: map[string][]int{}, regs: map[string]int{}, wrote: map[string]int{}}
	ps := make([]*simProc, procs)
	for i := range ps {
		ps[i] = &simProc{id: i, from: -1}
	}
	var h []Txn
	for tick := 1; len(h) < txns; tick++ {
		p := ps[s.rng.IntN(procs)]
		switch {
		case p.from < 0:
			s.invoke(p, tick)
		case s.serial && !p.applied && !p.fail:
			s.run(p, s.lists, s.regs)
			p.applied = true
		default:
			h = append(h, s.complete(p, tick))
		}
	}
	// Transactions still running end the history unknown: a serial one
	// may have taken effect.
	for _, p := range ps {
		if p.from >= 0 {
			h = append(h, Txn{Process: p.id, Invoke: time.Duration(p.from), Outcome: Info, Mops: unseen(p.mops)})
		}
	}
	return h
}

// unseen are mops without their reads' results.
func unseen(mops []Mop) []Mop {
	mops = slices.Clone(mops)
	for i := range mops {
		if mops[i].F == Read {
			mops[i].List, mops[i].Value = nil, 0
		}
	}
	return mops
}

func (s *simStore) invoke(p *simProc, tick int) {
	p.from, p.applied, p.mops = tick, false, nil
	p.fail, p.lost = s.rng.IntN(10) == 0, s.rng.IntN(10) == 0
	for range 1 + s.rng.IntN(4) {
		m := Mop{Key: []string{"x", "y", "z"}[s.rng.IntN(3)]}
		if s.rng.IntN(2) == 0 {
			s.next++
			m.F, m.Value = Append, s.next
			if s.w == Register {
				m.F = Write
			}
		}
		p.mops = append(p.mops, m)
	}
	if !s.serial {
		p.lists, p.regs = map[string][]int{}, maps.Clone(s.regs)
		for k, l := range s.lists {
			p.lists[k] = slices.Clone(l)
		}
	}
}

// run runs p's mops on lists and regs, filling in its reads.
func (s *simStore) run(p *simProc, lists map[string][]int, regs map[string]int) {
	for i, m := range p.mops {
		switch m.F {
		case Append:
			lists[m.Key] = append(lists[m.Key], m.Value)
		case Write:
			regs[m.Key] = m.Value
		case Read:
			if s.w == ListAppend {
				p.mops[i].List = append([]int{}, lists[m.Key]...)
			} else {
				p.mops[i].Value = regs[m.Key]
			}
		}
	}
}

func (s *simStore) complete(p *simProc, tick int) Txn {
	t := Txn{Process: p.id, Invoke: time.Duration(p.from), Complete: time.Duration(tick), Outcome: OK, Mops: p.mops}
	if !s.serial {
		s.run(p, p.lists, p.regs)
		for _, m := range p.mops {
			if m.F != Read && s.wrote[m.Key] > p.from {
				p.fail = true
			}
		}
		if !p.fail {
			for _, m := range p.mops {
				switch m.F {
				case Append:
					s.lists[m.Key] = append(s.lists[m.Key], m.Value)
				case Write:
					s.regs[m.Key] = m.Value
				}
				if m.F != Read {
					s.wrote[m.Key] = tick
				}
			}
		}
	}
	switch {
	case p.fail:
		t.Outcome = Fail
	case p.lost:
		t.Outcome = Info
	}
	if t.Outcome != OK {
		t.Mops = unseen(t.Mops)
	}
	p.from = -1
	return t
}

// Strictly serializable histories with concurrency, failures and lost
// answers report nothing, over many seeds of both workloads.
func TestSerialHistoriesValid(t *testing.T) {
	for _, w := range []Workload{ListAppend, Register} {
		for seed := range uint64(30) {
			h := simulate(w, true, seed, 5, 300)
			res, err := Check(w, h)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Valid() {
				t.Fatalf("%s seed %d: %s", w, seed, res.Describe())
			}
			if res.Committed < 200 {
				t.Fatalf("%s seed %d: %d committed of 300 prove little", w, seed, res.Committed)
			}
		}
	}
}

// Snapshot isolation allows write skew, and the checker finds it as
// G2-item, and nothing that snapshot isolation forbids (dirty or
// intermediate reads, cycles of writes and reads alone, read skew).
func TestSnapshotIsolationWriteSkew(t *testing.T) {
	for _, w := range []Workload{ListAppend, Register} {
		kinds := map[string]bool{}
		for seed := range uint64(10) {
			res, err := Check(w, simulate(w, false, seed, 5, 300))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range res.Kinds() {
				kinds[k] = true
			}
		}
		got := slices.Sorted(maps.Keys(kinds))
		if !kinds["G2-item"] || slices.ContainsFunc(got, func(k string) bool { return !strings.HasPrefix(k, "G2-item") }) {
			t.Fatalf("%s under snapshot isolation: kinds %v, want G2-item only", w, got)
		}
		t.Log(w, fmt.Sprint(got))
	}
}
