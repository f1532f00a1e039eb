package geo

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// sim runs n DCs over a MemNet on a simulated clock, one millisecond a
// step: each step ticks every DC, then delivers what is due.
type sim struct {
	t         *testing.T
	net       *MemNet
	dcs       []*DC
	now       time.Time
	decisions map[TxnID]Decision
	submitted map[TxnID]time.Time
	latency   map[TxnID]time.Duration
	// pausedUntil[i]: DC i is starved of CPU until then (not ticked, its
	// deliveries held); nil: none is.
	pausedUntil []time.Time
	held        []Delivery
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Epoch = 5 * time.Millisecond
	cfg.Deadline = 200 * time.Millisecond
	cfg.Retransmit = 50 * time.Millisecond
	return cfg
}

func newSim(t *testing.T, n int, oneWay time.Duration, drop float64) *sim {
	t.Helper()
	s := &sim{t: t, now: time.Unix(1_000_000, 0), decisions: map[TxnID]Decision{},
		submitted: map[TxnID]time.Time{}, latency: map[TxnID]time.Duration{}}
	s.net = NewMemNet(func(a, b int) time.Duration { return oneWay }, drop, 7)
	for i := range n {
		dc, err := NewDC(testConfig(), i, n, s.net.Endpoint(i), func(d Decision) {
			s.decisions[d.ID] = d
			s.latency[d.ID] = s.now.Sub(s.submitted[d.ID])
		})
		if err != nil {
			t.Fatal(err)
		}
		s.dcs = append(s.dcs, dc)
	}
	return s
}

func (s *sim) step() {
	s.now = s.now.Add(time.Millisecond)
	// A DC back from starvation takes what waited for it before its
	// clock ticks (the server's receive and tick goroutines race).
	s.deliver(nil)
	for i, dc := range s.dcs {
		if !s.paused(i) {
			dc.Tick(s.now)
		}
	}
	s.deliver(s.net.Due(s.now))
}

// deliver hands out what waited for DCs no longer paused, then due, and
// holds what is for a paused DC.
func (s *sim) deliver(due []Delivery) {
	due = append(s.held, due...)
	s.held = nil
	for _, d := range due {
		if s.paused(d.To) {
			s.held = append(s.held, d)
		} else {
			s.dcs[d.To].Receive(d.M)
		}
	}
}

func (s *sim) paused(dc int) bool { return s.pausedUntil != nil && s.now.Before(s.pausedUntil[dc]) }

func (s *sim) run(d time.Duration) {
	for range int(d / time.Millisecond) {
		s.step()
	}
}

func (s *sim) submit(dc int, ops []Op) TxnID {
	s.t.Helper()
	id, err := s.dcs[dc].Submit(ops)
	if err != nil {
		s.t.Fatal(err)
	}
	s.submitted[id] = s.now
	return id
}

// settle runs until every submitted transaction is decided and every DC
// validated the same epochs, or fails after limit.
func (s *sim) settle(limit time.Duration) {
	s.t.Helper()
	for waited := time.Duration(0); waited < limit; waited += time.Millisecond {
		s.step()
		if len(s.decisions) == len(s.submitted) && s.sameState() {
			return
		}
	}
	s.t.Fatalf("not settled after %v: %d of %d decided", limit, len(s.decisions), len(s.submitted))
}

func (s *sim) sameState() bool {
	for _, dc := range s.dcs[1:] {
		if dc.Position() != s.dcs[0].Position() || !maps.EqualFunc(dc.Validated(), s.dcs[0].Validated(), func(a, b []byte) bool { return string(a) == string(b) }) {
			return false
		}
	}
	return true
}

func acct(i int) string { return fmt.Sprintf("acct/%04d", i) }

// open puts balance into accounts 0..n-1 through DC 0 and waits for it.
func (s *sim) open(n int, balance int64) {
	s.t.Helper()
	var ops []Op
	for i := range n {
		ops = append(ops, Op{Kind: OpPut, Key: acct(i), Value: strconv.AppendInt(nil, balance, 10)})
	}
	s.submit(0, ops)
	s.settle(5 * time.Second)
}

func transfer(from, to int, amount int64) []Op {
	return []Op{
		{Kind: OpAdd, Key: acct(from), Delta: -amount, Floored: true},
		{Kind: OpAdd, Key: acct(to), Delta: amount},
	}
}

// transfers submits k random transfers at random DCs, one a millisecond.
func (s *sim) transfers(rng *rand.Rand, k, accounts int) {
	for range k {
		from, to := rng.IntN(accounts), rng.IntN(accounts-1)
		if to >= from {
			to++
		}
		s.submit(rng.IntN(len(s.dcs)), transfer(from, to, 1+rng.Int64N(30)))
		s.step()
	}
}

// total checks every DC's accounts add up to want and none is negative.
func (s *sim) total(accounts int, want int64) {
	s.t.Helper()
	for i, dc := range s.dcs {
		var sum int64
		for a := range accounts {
			v, _ := dc.Read(acct(a))
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				s.t.Fatalf("DC %d: account %d holds %q", i, a, v)
			}
			sum += n
		}
		if sum != want {
			s.t.Fatalf("DC %d: accounts hold %d in total, want %d", i, sum, want)
		}
	}
}
