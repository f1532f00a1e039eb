package geo

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The chain executor gives what running the transactions one by one in
// order gives (one partition: a single chain of hops), whatever the
// partitions' scheduling.
func TestChainsMatchSerialOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var txns []*Txn
	for i := range 300 {
		var ops []Op
		for range 1 + rng.IntN(4) {
			k := acct(rng.IntN(12))
			switch rng.IntN(5) {
			case 0:
				ops = append(ops, Op{Kind: OpGet, Key: k})
			case 1:
				ops = append(ops, Op{Kind: OpPut, Key: k, Value: []byte("7")})
			case 2:
				ops = append(ops, Op{Kind: OpDelete, Key: k})
			case 3:
				ops = append(ops, Op{Kind: OpAdd, Key: k, Delta: rng.Int64N(9) - 4, Floored: rng.IntN(2) == 0})
			default:
				ops = append(ops, Op{Kind: OpCompare, Key: k, Value: []byte("7")})
			}
		}
		txns = append(txns, &Txn{ID: TxnID{DC: 0, Seq: uint64(i)}, Ops: ops})
	}
	serial, chained := NewStore(1), NewStore(8)
	want := execute(serial, txns, 1, nil)
	for range 5 {
		got := execute(chained, txns, 1, nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatal("chained results differ from the serial ones")
		}
		if !reflect.DeepEqual(chained.All(), serial.All()) {
			t.Fatal("chained state differs from the serial one")
		}
		serial, chained = NewStore(1), NewStore(8)
		want = execute(serial, txns, 1, nil)
	}
	var aborted, committed int
	for _, r := range want {
		if r.Committed {
			committed++
		} else {
			aborted++
		}
	}
	if aborted == 0 || committed == 0 {
		t.Fatalf("the mix should both commit and abort: %d committed, %d aborted", committed, aborted)
	}
}

// A debit below the floor aborts the whole transfer: neither account
// changes, at every DC.
func TestConditionalDebitAbortsDeterministically(t *testing.T) {
	s := newSim(t, 3, 10*time.Millisecond, 0)
	s.open(2, 5)
	ok := s.submit(1, transfer(0, 1, 5))
	over := s.submit(2, transfer(0, 1, 1))
	s.settle(2 * time.Second)
	if !s.decisions[ok].Result.Committed {
		t.Fatalf("the first transfer aborted: %s", s.decisions[ok].Result.Reason)
	}
	if r := s.decisions[over].Result; r.Committed || !strings.Contains(r.Reason, "below 0") {
		t.Fatalf("the overdraft: committed %v, reason %q", r.Committed, r.Reason)
	}
	s.total(2, 10)
	if v, _ := s.dcs[0].Read(acct(1)); string(v) != "10" {
		t.Fatalf("account 1 holds %q, want 10", v)
	}
}

// Every DC orders and executes the same way whatever order messages
// arrive in: random delays and losses change nothing but timing.
func TestSameOrderWhateverTheArrival(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		s := newSim(t, 3, 0, 0.2)
		rng := rand.New(rand.NewPCG(seed, 9))
		s.net.delay = func(a, b int) time.Duration { return time.Duration(5+rng.IntN(40)) * time.Millisecond }
		s.open(10, 100)
		s.transfers(rng, 300, 10)
		s.settle(20 * time.Second)
		s.total(10, 1000)
	}
}

// With 100 ms one-way delays a transaction is decided at its gateway
// about one round trip (200 ms) plus up to two epochs after it arrived.
func TestCommitTakesAboutOneRoundTrip(t *testing.T) {
	s := newSim(t, 3, 100*time.Millisecond, 0)
	s.open(10, 100)
	clear(s.latency)
	rng := rand.New(rand.NewPCG(4, 4))
	s.transfers(rng, 50, 10)
	s.settle(5 * time.Second)
	for id, l := range s.latency {
		if l < 200*time.Millisecond || l > 200*time.Millisecond+3*testConfig().Epoch {
			t.Fatalf("transaction %v decided after %v, want one round trip and at most three epochs", id, l)
		}
	}
}

// A DC whose result differs (an injected fault) loses to the majority: it
// rolls back, adopts the majority's result, executes again what followed,
// and ends with the state of the others.
func TestDivergentDCRollsBackAndConverges(t *testing.T) {
	s := newSim(t, 3, 20*time.Millisecond, 0)
	s.open(4, 100)
	faults := 0
	s.dcs[2].fault = func(r *Result) {
		if r.Committed && len(r.Writes) > 0 && faults < 3 {
			faults++
			r.Writes[0].Value = []byte("1000000")
		}
	}
	rng := rand.New(rand.NewPCG(5, 5))
	s.transfers(rng, 40, 4)
	s.settle(5 * time.Second)
	if faults != 3 {
		t.Fatalf("%d faults injected, want 3", faults)
	}
	s.total(4, 400)
	for id, d := range s.decisions {
		if id.DC == 2 && d.Result.Committed {
			for _, w := range d.Result.Writes {
				if string(w.Value) == "1000000" {
					t.Fatalf("DC 2 answered its client with its own divergent result for %v", id)
				}
			}
		}
	}
}

// A DC cut off from the others: the two others, a majority, keep
// committing; its own transactions of the time are answered Retry (their
// input was left out); after the partition heals it catches up.
func TestPartitionedDCCatchesUp(t *testing.T) {
	s := newSim(t, 3, 20*time.Millisecond, 0)
	s.open(10, 100)
	s.net.Isolate(2, 3)
	cut := s.submit(2, transfer(0, 1, 1))
	rng := rand.New(rand.NewPCG(6, 6))
	var during []TxnID
	for range 30 {
		during = append(during, s.submit(rng.IntN(2), transfer(rng.IntN(5), 5+rng.IntN(5), 1)))
		s.step()
	}
	s.run(time.Second)
	for _, id := range during {
		if d, ok := s.decisions[id]; !ok || !d.Result.Committed {
			t.Fatalf("transaction %v of the majority side not committed during the partition", id)
		}
	}
	s.net.Heal()
	s.settle(10 * time.Second)
	if d := s.decisions[cut]; !d.Retry {
		t.Fatalf("the cut-off DC's transaction: %+v, want Retry", d)
	}
	s.total(10, 1000)
}

func TestValidateOps(t *testing.T) {
	cfg := testConfig()
	big := make([]Op, cfg.MaxOps+1)
	for i := range big {
		big[i] = Op{Kind: OpGet, Key: "k"}
	}
	for _, c := range []struct {
		ops  []Op
		want string
	}{
		{nil, "no operations"},
		{big, "more than the limit"},
		{[]Op{{Kind: OpGet}}, "empty key"},
		{[]Op{{Kind: 99, Key: "k"}}, "unknown kind"},
		{[]Op{{Kind: OpPut, Key: "k", Value: make([]byte, cfg.MaxBytes)}}, "bytes"},
	} {
		err := ValidateOps(cfg, c.ops)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateOps: %v, want %q", err, c.want)
		}
	}
}
