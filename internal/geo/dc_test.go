package geo

import (
	"errors"
	"fmt"
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

// With 100 ms one-way delays a transaction is decided at its gateway one
// round trip (200 ms) plus the wait for its epoch to end after it arrived:
// the results come back in early messages, not with the next epoch.
func TestCommitTakesAboutOneRoundTrip(t *testing.T) {
	s := newSim(t, 3, 100*time.Millisecond, 0)
	s.open(10, 100)
	clear(s.latency)
	rng := rand.New(rand.NewPCG(4, 4))
	s.transfers(rng, 50, 10)
	s.settle(5 * time.Second)
	for id, l := range s.latency {
		if l < 200*time.Millisecond || l > 200*time.Millisecond+testConfig().Epoch {
			t.Fatalf("transaction %v decided after %v, want one round trip and at most one epoch", id, l)
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
	if faults != 3 || s.dcs[2].Rollbacks() == 0 {
		t.Fatalf("%d faults injected (want 3), %d rollbacks at DC 2 (want some)", faults, s.dcs[2].Rollbacks())
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

// A DC whose messages reach one peer just after it voted them out (its
// deadline passed and DC 2's message showing so arrived, 20 ms later)
// and the other never: the peer has run the late input before the vote
// to leave it out reaches it, so it rolls back; the slow DC's
// transactions are answered Retry, the others' commit, and all three
// converge.
func TestLateInputLeftOutRollsBack(t *testing.T) {
	s := newSim(t, 3, 0, 0)
	s.open(10, 100)
	deadline := testConfig().Deadline
	s.net.delay = func(from, to int) time.Duration {
		switch {
		case from == 1 && to == 0:
			return deadline + 50*time.Millisecond
		case from == 1 && to == 2:
			return time.Hour
		}
		return 20 * time.Millisecond
	}
	var slow []TxnID
	for i := range 20 {
		slow = append(slow, s.submit(1, transfer(i%10, (i+1)%10, 1)))
		s.submit(0, transfer((i+3)%10, (i+5)%10, 1))
		s.submit(2, transfer((i+4)%10, (i+7)%10, 1))
		s.step()
	}
	s.settle(10 * time.Second)
	for _, id := range slow {
		if !s.decisions[id].Retry {
			t.Fatalf("the slow DC's transaction %v: %+v, want Retry", id, s.decisions[id])
		}
	}
	for id, d := range s.decisions {
		if id.DC != 1 && !d.Result.Committed {
			t.Fatalf("transaction %v: %+v, want committed", id, d)
		}
	}
	if s.dcs[0].Rollbacks() == 0 {
		t.Fatal("DC 0 never rolled back an epoch it ran with the late input")
	}
	s.total(10, 1000)
}

// A DC whose messages reached one peer but not the other, then is gone for
// good: the peer that got them voted them in, so the other could settle
// those epochs only with a copy, which the first relays. The two keep
// committing.
func TestInputOfAVanishedDCIsRelayed(t *testing.T) {
	s := newSim(t, 3, 20*time.Millisecond, 0)
	s.open(10, 100)
	s.net.delay = func(from, to int) time.Duration {
		if from == 2 && to == 1 {
			return time.Hour
		}
		return 20 * time.Millisecond
	}
	var ids []TxnID
	for i := range 10 {
		ids = append(ids, s.submit(i%3, transfer(i, (i+1)%10, 1)))
		s.step()
	}
	s.run(50 * time.Millisecond)
	s.net.Isolate(2, 3)
	for i := range 10 {
		ids = append(ids, s.submit(i%2, transfer(i, (i+3)%10, 1)))
		s.step()
	}
	s.run(3 * time.Second)
	for _, id := range ids {
		if id.DC != 2 && !s.decisions[id].Result.Committed {
			t.Fatalf("transaction %v: %+v, want committed", id, s.decisions[id])
		}
	}
	s.dcs = s.dcs[:2]
	if !s.sameState() {
		t.Fatal("DCs 0 and 1 differ")
	}
	s.total(10, 1000)
}

// DC 2 is gone for good; then DC 1 is starved of CPU for two deadlines
// (a loaded machine holds a gateway's runtime back so) and on waking
// closes every epoch it missed at once, long after DC 0 voted their
// inputs out. With two DCs left every input needs both their votes: DC 1
// must vote its late inputs out too, or each stays split 1–1 with no third
// vote to settle it and both DCs stall for good (how
// TestGeoRestartedGatewayStaysOut failed under load). Its transaction of
// the time is answered Retry; DC 0's commit.
func TestLateSenderWithADCGone(t *testing.T) {
	s := simWithDC2Gone(t)
	deadline := testConfig().Deadline
	s.pausedUntil = []time.Time{{}, s.now.Add(2 * deadline)}
	late := s.submit(1, transfer(0, 1, 1))
	s.run(3 * deadline)
	s.pausedUntil = nil
	after := s.submit(0, transfer(2, 3, 1))
	s.settle(5 * time.Second)
	if d := s.decisions[late]; !d.Retry {
		t.Fatalf("DC 1's transaction sent late: %+v, want Retry", d)
	}
	if d := s.decisions[after]; !d.Result.Committed {
		t.Fatalf("DC 0's transaction: %+v, want committed", d)
	}
	s.total(10, 1000)
}

// DC 2 is gone for good; DC 1's messages, sent in time, reach DC 0 only
// after DC 0's deadline for a while (a loaded machine held them back
// while DC 0's clock ran on). DC 0 must not vote them out by its clock
// alone: DC 1 votes "have" on its own, and with no third vote the split
// never settles (how TestGeoRestartedGatewayStaysOut still failed at a
// fraction of a CPU once late senders voted alike). DC 0 votes a missing
// input out only once a DC other than its sender shows the deadline
// passed for it too; here none can, so it waits for the message.
func TestLateDeliveryWithADCGone(t *testing.T) {
	s := simWithDC2Gone(t)
	deadline := testConfig().Deadline
	slow := s.now
	s.net.delay = func(from, to int) time.Duration {
		if from == 1 && s.now.Sub(slow) < deadline {
			return 2 * deadline
		}
		return 20 * time.Millisecond
	}
	ids := []TxnID{s.submit(1, transfer(0, 1, 1)), s.submit(0, transfer(2, 3, 1))}
	s.run(3 * deadline)
	ids = append(ids, s.submit(0, transfer(4, 5, 1)))
	s.settle(5 * time.Second)
	for _, id := range ids {
		if !s.decisions[id].Result.Committed {
			t.Fatalf("transaction %v: %+v, want committed", id, s.decisions[id])
		}
	}
	s.total(10, 1000)
}

// countingTransport counts what a DC sends to each peer.
type countingTransport struct {
	Transport
	sent map[int]int
}

func (c countingTransport) Send(to int, m *Message) {
	c.sent[to]++
	c.Transport.Send(to, m)
}

// A peer that is gone (a gateway restarted and staying out) acknowledges
// nothing; it gets one message of each DC a retransmission, to resume by
// once it is back, not the whole batch it lacks again and again (128
// messages every interval: on a loaded machine that work delayed the
// remaining DCs' messages to each other past their deadline). What DC 0
// sends it beyond what it sends the live DC 1 is those retransmissions.
func TestSilentPeerGetsNoRetransmitStorm(t *testing.T) {
	s := newSim(t, 3, 20*time.Millisecond, 0)
	s.open(10, 100)
	s.net.Isolate(2, 3)
	s.dcs = s.dcs[:2]
	s.run(2 * time.Second)
	count := countingTransport{Transport: s.dcs[0].tr, sent: map[int]int{}}
	s.dcs[0].tr = count
	const span = time.Second
	s.run(span)
	retransmissions := int(span/testConfig().Retransmit) + 1
	if extra := count.sent[2] - count.sent[1]; extra > 2*retransmissions {
		t.Fatalf("DC 0 sent the gone DC 2 %d messages more than the live DC 1 in %v, want at most one of each DC a retransmission (%d)", extra, span, 2*retransmissions)
	}
	id := s.submit(0, transfer(0, 1, 1))
	s.settle(5 * time.Second)
	if !s.decisions[id].Result.Committed {
		t.Fatalf("DC 0's transaction: %+v, want committed", s.decisions[id])
	}
}

// With every DC reporting and no majority, the largest group wins, ties
// to the group with the lowest DC id.
func TestDecidedWithoutMajority(t *testing.T) {
	d, err := NewDC(testConfig(), 0, 4, NewMemNet(nil, 0, 1).Endpoint(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := TxnID{DC: 3, Seq: 1}
	for dc, reason := range []string{"x", "y", "y", "x"} {
		d.note(dc, Result{ID: id, Members: 15, Reason: reason}, 1)
		if _, ok := d.decided(id, 15); ok != (dc == 3) {
			t.Fatalf("after %d results decided = %v", dc+1, ok)
		}
	}
	if r, _ := d.decided(id, 15); r.Reason != "x" {
		t.Fatalf("a 2–2 tie went to %q, want the group of DC 0 (x)", r.Reason)
	}
	d.note(1, Result{ID: id, Members: 15, Reason: "x"}, 1)
	if r, ok := d.decided(id, 15); !ok || r.Reason != "x" {
		t.Fatalf("3 of 4 agree on x: %q, %v", r.Reason, ok)
	}
	if _, ok := d.decided(id, 7); ok {
		t.Fatal("results for other inputs decided")
	}
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

// DC 0 is starved; DCs 1 and 2 leave its inputs out and go on. Then DC
// 1's messages reach DC 2 after its deadline. DC 2 used to vote them out
// by its clock while DC 0 held them but had not voted, so those epochs
// waited for DC 0's votes, which came back in its message for the epoch
// it stopped at, settled long before at DCs 1 and 2 (they must still take
// that message's votes, or wait forever). Now DC 2 votes a missing input
// out only once a DC other than its sender shows the deadline passed
// (othersPast), which the starved DC 0 cannot: DC 2 waits for DC 1's
// messages and votes them in, and DCs 1 and 2 go on without DC 0.
func TestLateSendersVotesCount(t *testing.T) {
	s := newSim(t, 3, 20*time.Millisecond, 0)
	s.open(10, 100)
	deadline := testConfig().Deadline
	starved := s.now
	s.pausedUntil = []time.Time{starved.Add(3 * deadline), {}, {}}
	s.run(50 * time.Millisecond)
	split := s.now
	s.net.delay = func(from, to int) time.Duration {
		if from == 1 && to == 2 && s.now.Sub(split) < deadline { // sent again too: late all the same
			return deadline + 100*time.Millisecond
		}
		return 20 * time.Millisecond
	}
	late := s.submit(1, transfer(0, 1, 5))
	s.run(2 * deadline)
	if p, e := s.dcs[1].Position(), s.dcs[1].epochOf(split); p <= e+1 {
		t.Fatalf("DC 1 is at epoch %d, want past %d: DCs 1 and 2 go on while DC 0 is starved", p, e+1)
	}
	s.submit(2, transfer(2, 3, 5))
	s.settle(5 * time.Second)
	if !s.decisions[late].Result.Committed {
		t.Fatalf("DC 1's transaction, voted in by DCs 1 and 2: %+v, want committed", s.decisions[late])
	}
	s.total(10, 1000)
}

// DCs starved of CPU in turn (not ticked, their messages waiting), over a
// network that delays some messages past the deadline and loses some:
// inputs come late and are left out, DCs run epochs with inputs later left
// out and roll back, late senders' votes ride in messages for epochs
// settled elsewhere. Every transaction is still decided, the same way at
// every DC, and the total is kept. Each seed is one deterministic
// schedule; before the fixes it exercises, some stalled (a late message's
// votes ignored) and some diverged (stale speculative results counted).
func TestStarvedDCsDecideAlike(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			starvedSchedule(t, seed, harm{late: 10, lateBy: 400, slow: 60, pause: 200, maxPause: 500, steps: 400})
		})
	}
}

// A late sender's message, left out, carried its votes on later epochs;
// it was lost on the way to one peer, which counts a left-out input as
// held and so never got it again: that peer waited for the votes forever.
// These harsher schedules (more late messages, longer starvation) stalled
// so before the votes of a left-out message went out again.
func TestLostLateVotesAreSentAgain(t *testing.T) {
	for _, seed := range []uint64{164, 317, 346} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			starvedSchedule(t, seed, harm{late: 5, lateBy: 800, slow: 150, pause: 100, maxPause: 1000, steps: 1500})
		})
	}
}

// A DC's results for a transaction are replaced by its later ones (after
// it rolled back) in the order it sent them, not as they arrive: an epoch
// message lost and sent again arrives after newer ones, and its stale
// results (computed on a speculative state since dropped, or with inputs
// later left out) used to replace the newer ones, which are not sent
// again. One DC then never saw a majority for a transaction and stopped
// validating for good while the others went on. Each of these schedules
// stalled so on one of main (1096), 55698cb/cf10130 (1249) and 28d8d59
// (1291): "not settled after 30s".
func TestStaleResultsDoNotReplaceNewer(t *testing.T) {
	for _, seed := range []uint64{1096, 1249, 1291} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			starvedSchedule(t, seed, harm{late: 5, lateBy: 800, slow: 150, pause: 100, maxPause: 1000, steps: 1500})
		})
	}
}

// harm is how hard starvedSchedule is on the DCs for steps ms: one message
// in late is delayed past the deadline by up to lateBy ms, the others by
// up to slow ms; each DC is starved with a chance of one in pause a step,
// for up to maxPause ms.
type harm struct{ late, lateBy, slow, pause, maxPause, steps int }

// starvedSchedule runs transfers over a lossy network under h, then heals
// the network and checks that every transaction is decided alike.
func starvedSchedule(t *testing.T, seed uint64, h harm) {
	deadline := testConfig().Deadline
	s := newSim(t, 3, 20*time.Millisecond, 0)
	s.open(10, 100)
	rng := rand.New(rand.NewPCG(seed, 9))
	s.net.drop = 0.05
	s.net.delay = func(from, to int) time.Duration {
		if rng.IntN(h.late) == 0 {
			return deadline + time.Duration(rng.IntN(h.lateBy))*time.Millisecond
		}
		return time.Duration(10+rng.IntN(h.slow)) * time.Millisecond
	}
	s.pausedUntil = make([]time.Time, 3)
	for range h.steps {
		for i := range s.pausedUntil {
			if !s.paused(i) && rng.IntN(h.pause) == 0 {
				s.pausedUntil[i] = s.now.Add(time.Duration(50+rng.IntN(h.maxPause)) * time.Millisecond)
			}
		}
		if rng.IntN(2) == 0 {
			from, to := rng.IntN(10), rng.IntN(9)
			if to >= from {
				to++
			}
			s.submit(rng.IntN(3), transfer(from, to, 1+rng.Int64N(30)))
		}
		s.step()
	}
	s.pausedUntil, s.net.drop = nil, 0
	s.net.delay = func(int, int) time.Duration { return 20 * time.Millisecond }
	s.settle(30 * time.Second)
	s.total(10, 1000)
}

// A DC back from a partition lacks hundreds of messages of each peer,
// more than one retransmission sends (maxRetransmit). The batch goes to
// the oldest epochs first, every DC's messages alike, so the DC validates
// as its batches arrive. It used to take the DCs in id order: the whole
// batch, from DC 1 as from DC 0, went to DC 0's messages until the DC had
// caught up on all of them, and none to DC 1's input of the first epoch
// it had to validate. A dump of the server far behind (TestGeoBankAcrossRegions
// at a third of a CPU, before the wire format stopped being gob) showed
// so: DCs 0 and 1 waiting on DC 2's input of their next epoch, which only
// later batches would have carried, and DC 2 on DC 1's.
func TestRetransmissionSendsOldestEpochsFirst(t *testing.T) {
	s := newSim(t, 3, 20*time.Millisecond, 0)
	s.open(10, 100)
	s.net.Isolate(2, 3)
	s.run(3 * time.Second)
	cut := s.dcs[2].Position()
	s.net.Heal()
	s.run(3 * testConfig().Retransmit)
	t.Logf("DC 2 at %d past the cut, DC 0 at %d", s.dcs[2].Position()-cut, s.dcs[0].Position()-cut)
	if got := s.dcs[2].Position() - cut; got < maxRetransmit/2 {
		t.Fatalf("DC 2 validated %d epochs in the three retransmissions after the partition healed, want at least %d (one batch's worth of each peer's messages)", got, maxRetransmit/2)
	}
	s.settle(5 * time.Second)
}

// simWithDC2Gone is three DCs with 10 accounts of 100, DC 2 cut off and
// gone for good after a second of running.
func simWithDC2Gone(t *testing.T) *sim {
	s := newSim(t, 3, 20*time.Millisecond, 0)
	s.open(10, 100)
	s.net.Isolate(2, 3)
	s.dcs = s.dcs[:2]
	s.run(time.Second)
	return s
}
