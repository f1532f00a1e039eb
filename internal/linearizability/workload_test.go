package linearizability

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// storeDo returns a Do that runs operations on s, answering a CAS that did
// not swap with the current value as a real store does.
func storeDo(s *simStore, rng *rand.Rand) Do {
	return func(in Input) Reply {
		out := s.apply(rng, in)
		res := Reply{Output: out}
		if in.Kind == CAS && !out.Swapped {
			s.mu.Lock()
			if cur := s.cur[in.Key]; cur.found {
				v := cur.value
				res.Current = &v
			}
			s.mu.Unlock()
		}
		return res
	}
}

func newSimStore(staleReads float64) *simStore {
	return &simStore{cur: map[string]register{}, prev: map[string]register{}, staleReads: staleReads}
}

// scripted returns a Do that answers with replies in order and remembers
// the inputs it saw.
func scripted(t *testing.T, seen *[]Input, replies ...Reply) Do {
	return func(in Input) Reply {
		*seen = append(*seen, in)
		if len(replies) == 0 {
			t.Fatalf("unexpected operation %+v", in)
		}
		r := replies[0]
		replies = replies[1:]
		return r
	}
}

func str(s string) *string { return &s }

func TestClientCASExpectsWhatItLastObserved(t *testing.T) {
	rec := NewRecorder()
	c := NewClient(7, rec, []string{"k"}, 1)
	var ins []Input
	ok := func(out Output, current *string) Reply { return Reply{Output: out, Current: current} }
	swapped, unswapped := Output{Swapped: true}, Output{Swapped: false}
	do := scripted(t, &ins,
		ok(swapped, nil),        // 1 cas <absent> -> c7-1
		ok(unswapped, nil),      // 2 cas c7-1 -> c7-2: the key is absent
		ok(unswapped, str("x")), // 3 cas <absent> -> c7-3: the key holds x
		Reply{Outcome: OutcomeUnknown, Output: swapped, Current: str("bad")}, // 4 cas x -> c7-4
		Reply{Outcome: OutcomeFailed, Output: swapped, Err: errTest},         // 5 cas x -> c7-5
		ok(swapped, nil),                         // 6 cas x -> c7-6
		ok(Output{Found: true, Value: "y"}, nil), // 7 get
		ok(unswapped, nil),                       // 8 cas y -> c7-7: absent
		ok(Output{}, nil),                        // 9 put c7-8 (tells nothing about the state)
		ok(Output{Found: true, Value: "z"}, nil), // 10 get
		Reply{Outcome: OutcomeUnknown, Output: Output{Found: true, Value: "junk"}, Err: errTest}, // 11 get
		ok(swapped, nil),              // 12 cas z -> c7-9
		ok(Output{Found: false}, nil), // 13 get
		ok(swapped, nil),              // 14 cas <absent> -> c7-10
	)
	for _, op := range []func(string, Do) Reply{c.CAS, c.CAS, c.CAS, c.CAS, c.CAS, c.CAS, c.Get, c.CAS, c.Put, c.Get, c.Get, c.CAS, c.Get, c.CAS} {
		op("k", do)
	}

	want := []Input{
		CASAbsentInput("k", "c7-1"),
		CASInput("k", "c7-1", "c7-2"),
		CASAbsentInput("k", "c7-3"),
		CASInput("k", "x", "c7-4"),
		CASInput("k", "x", "c7-5"),
		CASInput("k", "x", "c7-6"),
		GetInput("k"),
		CASInput("k", "y", "c7-7"),
		PutInput("k", "c7-8"),
		GetInput("k"),
		GetInput("k"),
		CASInput("k", "z", "c7-9"),
		GetInput("k"),
		CASAbsentInput("k", "c7-10"),
	}
	if fmt.Sprint(ins) != fmt.Sprint(want) {
		t.Fatalf("inputs:\n got %+v\nwant %+v", ins, want)
	}

	// Recorded: everything but the failed CAS (5); 4 and 11 as unknown.
	h := rec.History()
	if len(h) != len(want)-1 {
		t.Fatalf("history has %d ops, want %d (the failed CAS dropped): %+v", len(h), len(want)-1, h)
	}
	for i, op := range h {
		n := i + 1 // the operation's number above
		if n >= 5 {
			n++
		}
		if op.ClientID != 7 || op.Input != want[n-1] {
			t.Errorf("op %d recorded as %+v", n, op)
		}
		if unknown := n == 4 || n == 11; op.Output.Unknown != unknown {
			t.Errorf("op %d: unknown = %v, want %v", n, op.Output.Unknown, unknown)
		}
	}
	if op := h[5]; !op.Output.Found || op.Output.Value != "y" {
		t.Errorf("get recorded as %+v", op)
	}
}

var errTest = errors.New("test error")

func TestClientStepMix(t *testing.T) {
	keys := Keys(3)
	if fmt.Sprint(keys) != "[linz/k0 linz/k1 linz/k2]" {
		t.Fatalf("Keys(3) = %q", keys)
	}
	run := func(id int, seed uint64) (History, *Stats) {
		rec := NewRecorder()
		stats := &Stats{}
		c := NewClient(id, rec, keys, seed)
		c.OnReply = stats.Record
		do := storeDo(newSimStore(0), rand.New(rand.NewPCG(0, 0)))
		for range 3000 {
			c.Step(do)
		}
		return rec.History(), stats
	}
	h, stats := run(1, 42)

	kinds := map[OpKind]int{}
	perKey := map[string]int{}
	values := map[string]bool{}
	casOk := 0
	for _, op := range h {
		kinds[op.Input.Kind]++
		perKey[op.Input.Key]++
		if op.Input.Kind == Put || op.Input.Kind == CAS {
			if values[op.Input.Value] || !strings.HasPrefix(op.Input.Value, "c1-") {
				t.Fatalf("value %q reused or not the client's", op.Input.Value)
			}
			values[op.Input.Value] = true
		}
		if op.Input.Kind == CAS && op.Output.Swapped {
			casOk++
		}
	}
	for kind, want := range map[OpKind]int{Get: 1200, Put: 900, CAS: 900} {
		if got := kinds[kind]; got < want*85/100 || got > want*115/100 {
			t.Errorf("%d %s ops of 3000, want about %d", got, kind, want)
		}
	}
	for _, k := range keys {
		if perKey[k] < 800 {
			t.Errorf("key %s used %d times of 3000", k, perKey[k])
		}
	}
	// Alone on a correct store, a CAS misses only when the client's own
	// put changed the key since it last looked: most swap.
	if casOk < kinds[CAS]/3 {
		t.Errorf("only %d of %d CAS swapped", casOk, kinds[CAS])
	}
	if res := Check(h, testTimeout); !res.Ok {
		t.Errorf("sequential history on a correct store: %s", res.Describe)
	}
	if got := stats.String(); got != fmt.Sprintf("3000 ok (%d get, %d put, %d cas), 0 unknown, 0 failed (dropped)", kinds[Get], kinds[Put], kinds[CAS]) {
		t.Errorf("stats: %s", got)
	}

	// The seed and the id determine the choices.
	again, _ := run(1, 42)
	other, _ := run(2, 42)
	same, differ := true, false
	for i := range h {
		same = same && h[i].Input == again[i].Input
		differ = differ || h[i].Input.Key != other[i].Input.Key || h[i].Input.Kind != other[i].Input.Kind
	}
	if !same {
		t.Error("same seed and id, different operations")
	}
	if !differ {
		t.Error("different ids, same operations")
	}
}

// runSim drives a simStore with concurrent workload clients.
func runSim(clients, ops int, staleReads float64, seed uint64) History {
	store := newSimStore(staleReads)
	rec := NewRecorder()
	keys := Keys(4)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c := NewClient(i, rec, keys, seed)
			do := storeDo(store, rand.New(rand.NewPCG(seed, uint64(1000+i))))
			for range ops {
				c.Step(func(in Input) Reply {
					// Let other clients' operations overlap this one.
					if c.Rand().IntN(4) == 0 {
						time.Sleep(time.Duration(c.Rand().IntN(50)) * time.Microsecond)
					}
					return do(in)
				})
			}
		})
	}
	wg.Wait()
	return rec.History()
}

func TestClientWorkloadChecks(t *testing.T) {
	if res := checkT(t, runSim(6, 500, 0, 3)); !res.Ok {
		t.Fatalf("linearizable store rejected: %s", res.Describe)
	}
	res := checkT(t, runSim(6, 500, 0.05, 3))
	if res.Ok {
		t.Fatalf("stale reads not detected: %s", res.Describe)
	}
}

func TestRecorderRunAndFinish(t *testing.T) {
	rec := NewRecorder()
	for _, o := range []Outcome{OutcomeOk, OutcomeUnknown, OutcomeFailed} {
		res := rec.Run(0, PutInput("x", o.String()), func(Input) Reply { return Reply{Outcome: o, Err: errTest} })
		if res.Outcome != o || res.Err != errTest {
			t.Errorf("Run returned %+v", res)
		}
	}
	h := rec.History()
	if len(h) != 2 || h[0].Input.Value != "ok" || h[0].Output.Unknown || h[1].Input.Value != "unknown" || !h[1].Output.Unknown {
		t.Fatalf("history %+v", h)
	}
}

func TestStatsOkBetween(t *testing.T) {
	var s Stats
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s.Record(GetInput("k"), at(0), Reply{})
	s.Record(PutInput("k", "v"), at(10), Reply{})
	s.Record(PutInput("k", "v"), at(20), Reply{Outcome: OutcomeUnknown})
	s.Record(CASAbsentInput("k", "v"), at(20), Reply{Outcome: OutcomeFailed})
	s.Record(CASAbsentInput("k", "v"), at(30), Reply{})
	for _, tc := range []struct{ from, to, want int }{{0, 10, 1}, {0, 31, 3}, {10, 30, 1}, {31, 40, 0}} {
		if got := s.OkBetween(at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("OkBetween(%d, %d) = %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
	if got, want := s.String(), "3 ok (1 get, 1 put, 1 cas), 1 unknown, 1 failed (dropped)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestStatsEvents(t *testing.T) {
	var s Stats
	if evs := s.Events(time.Now()); len(evs) != 0 {
		t.Fatalf("events before any: %+v", evs)
	}
	rec := func() { s.Record(GetInput("k"), time.Now(), Reply{}) }
	rec() // before the first event: not counted
	time.Sleep(time.Millisecond)
	s.Mark("first")
	rec()
	rec()
	time.Sleep(time.Millisecond)
	s.Mark("second")
	time.Sleep(time.Millisecond)
	end := time.Now()
	time.Sleep(time.Millisecond)
	rec() // after the end: not counted
	evs := s.Events(end)
	if len(evs) != 2 || evs[0].What != "first" || evs[0].Ok != 2 || evs[1].What != "second" || evs[1].Ok != 0 || !evs[0].At.Before(evs[1].At) {
		t.Fatalf("events %+v", evs)
	}
}
