package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tidekv/tidekv/client"
)

// TestBankUnderFaults runs the bank's transfers (docs/transactions.md step
// 7) on 4 nodes while a seeded schedule splits and merges the accounts'
// ranges, moves their replicas and leases, partitions a node, skews a
// node's clock within half the max offset, and kills the node that
// coordinates the most transactions and restarts it. Every transfer
// writes a marker beside its source account (so a transfer within one
// range stays a one-phase commit), which tells at the end exactly which
// transfers committed: the acknowledged ones all, the given-up ones none,
// and the balances are the start moved by what the markers say. Beside
// them run compare-and-increments (TxnIf, with markers the same way) and
// audits that sum the accounts with Tx.Scan; every snapshot scan and audit
// sees the total, and once healed no intent remains.
//
// One round by default; TIDEKV_TXNFAULTS_SEED=n replays a schedule;
// TIDEKV_TXNFAULTS_LONG=1 (or a duration) repeats the schedule's rounds for
// 3 minutes (or that long); TIDEKV_TXNFAULTS_KINDS=split,kill,... runs only
// those faults (to narrow down what a failure needs).
func TestBankUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault schedule on 4 nodes: about 20 s")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("TIDEKV_TXNFAULTS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("TIDEKV_TXNFAULTS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (TIDEKV_TXNFAULTS_SEED=%d replays the schedule)", seed, seed)
	runFor := faultsRunFor(t)
	b := startFaultBank(t, seed, runFor)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	b.runWorkers(&wg, stop)
	rounds := b.runSchedule(runFor)
	close(stop)
	wg.Wait()
	b.faults.heal()
	// A dead coordinator's intents go within the expiry and one push by
	// whoever meets them (the snapshot scans meet the transfers' markers)
	// or one GC sweep (the counter's); the rest is slack for a loaded
	// machine.
	cfg := b.tc.cfgs[0]
	heal := cfg.Txn.Expiry + cfg.GC.Interval + 4*time.Second
	start := time.Now()
	eventually(t, heal, "a snapshot scan and no intents once healed", func() error {
		total, at, err := bankTotal(b.ctx, b.c)
		if err == nil && total != bankAccounts*bankStart {
			t.Fatalf("snapshot scan at %s once healed: total %d, want %d", at, total, bankAccounts*bankStart)
		}
		if err != nil {
			return err
		}
		return intentsLeft(b.tc)
	})
	t.Logf("%d rounds of faults; healed: the total and no intent after %v", rounds, time.Since(start).Round(time.Millisecond))
	b.checkLedger()
	b.logCounts()
}

// faultsRunFor is how long the schedule repeats: 0 for one round.
func faultsRunFor(t *testing.T) time.Duration {
	switch v := os.Getenv("TIDEKV_TXNFAULTS_LONG"); v {
	case "", "0":
		return 0
	case "1":
		return 3 * time.Minute
	default:
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TIDEKV_TXNFAULTS_LONG=%q: 1 or a duration like 10m", v)
		}
		return d
	}
}

// faultBank is the bank test's cluster, its fault controls and what its
// clients were answered.
type faultBank struct {
	t      *testing.T
	tc     *testCluster
	c      *client.Client
	ctx    context.Context
	faults *faultNodes
	seed   int64
	ids    atomic.Int64
	// commitsGone are the commits counted by nodes since killed (a
	// restart starts its counters at 0), by path.
	commitsGone map[string]int

	mu sync.Mutex
	// answers are the transfers' and increments' answers, by marker key,
	// and when they came.
	answers    map[string]answer
	answeredAt map[string]time.Time
	// timeline says when each fault began and ended, for a violation's
	// log.
	timeline []string
	counts   map[string]int
	others   []string // the first few unexpected errors, for the log
}

// answer is what a client learnt of its transaction.
type answer int

const (
	answeredCommitted answer = iota // committed: must be applied
	answeredNot                     // gave up on conflicts, or the compare failed: must not be
	answeredUnknown                 // ambiguous, or cut off by a fault: either
)

const ctrKey = "ctr"

// markerKey is transfer id's marker: beside its source account (between
// acct-<from> and the next account), so in the account's range.
func markerKey(from int, id int64) []byte { return []byte(fmt.Sprintf("acct-%d/x%06d", from, id)) }

// incrMarkerKey is increment id's marker, beside the counter; it holds the
// value the increment wrote, so two increments from one value show.
func incrMarkerKey(id int64) []byte { return []byte(fmt.Sprintf("%s/x%06d", ctrKey, id)) }

func isMarker(key []byte) bool { return bytes.Contains(key, []byte("/x")) }

func startFaultBank(t *testing.T, seed int64, runFor time.Duration) *faultBank {
	f := &faultNodes{}
	tc, c, _ := startBankOn(t, 4, f.adjust)
	// startBank's context ends too soon for a long run.
	ctx, cancel := context.WithTimeout(context.Background(), runFor+2*time.Minute)
	t.Cleanup(cancel)
	if err := c.Put(ctx, []byte(ctrKey), []byte("0")); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, what := range []string{"transfer", "increment", "audit"} {
		// Logged even when none happened.
		counts[what], counts[what+" ambiguous"], counts[what+" gave up"] = 0, 0, 0
	}
	return &faultBank{t: t, tc: tc, c: c, ctx: ctx, faults: f, seed: seed,
		commitsGone: map[string]int{}, answers: map[string]answer{}, answeredAt: map[string]time.Time{}, counts: counts}
}

// record notes what a transaction of marker key was answered, and counts
// it under what.
func (b *faultBank) record(key []byte, what string, err error) {
	o := answeredCommitted
	switch {
	case err == nil:
	case errors.Is(err, client.ErrTxnRetry):
		o, what = answeredNot, what+" gave up"
	case errors.Is(err, client.ErrAmbiguous):
		o, what = answeredUnknown, what+" ambiguous"
	default:
		o, what = answeredUnknown, what+" failed otherwise"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if key != nil {
		b.answers[string(key)], b.answeredAt[string(key)] = o, time.Now()
	}
	b.counts[what]++
	if o == answeredUnknown && !errors.Is(err, client.ErrAmbiguous) && len(b.others) < 5 {
		b.others = append(b.others, err.Error())
	}
}

// violation fails the test, saying the first few of its kind (one broken
// commit shows in every later scan).
func (b *faultBank) violation(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.counts["total violated"]++; b.counts["total violated"] <= 3 {
		b.t.Errorf(format, args...)
	} else {
		b.t.Fail()
	}
}

// note adds an entry to the fault timeline.
func (b *faultBank) note(format string, args ...any) {
	b.mu.Lock()
	b.timeline = append(b.timeline, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	b.mu.Unlock()
}

func (b *faultBank) count(what string) {
	b.mu.Lock()
	b.counts[what]++
	b.mu.Unlock()
}

// runWorkers starts 3 transferring workers, two incrementing, one
// auditing and one snapshot-scanning, until stop.
func (b *faultBank) runWorkers(wg *sync.WaitGroup, stop <-chan struct{}) {
	loop := func(w int, step func(rng *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(b.seed + int64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				step(rng)
			}
		}()
	}
	for w := range 3 {
		loop(w+1, b.markedTransfer)
	}
	// Two incrementers, so that compares fail too.
	loop(4, func(*rand.Rand) { b.increment() })
	loop(5, func(*rand.Rand) { b.increment() })
	loop(6, func(*rand.Rand) { b.audit() })
	loop(7, func(*rand.Rand) { b.snapshotTotal() })
}

// markedTransfer moves a random amount between two random accounts and
// writes the transfer's marker in the same transaction.
func (b *faultBank) markedTransfer(rng *rand.Rand) {
	from, to := rng.Intn(bankAccounts), rng.Intn(bankAccounts-1)
	if to >= from {
		to++
	}
	amt, id := 1+rng.Intn(10), b.ids.Add(1)
	mark := markerKey(from, id)
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	err := b.c.Txn(ctx, func(tx *client.Tx) error {
		if err := transferIn(ctx, tx, from, to, amt); err != nil {
			return err
		}
		return tx.Put(ctx, mark, []byte(fmt.Sprintf("%d %d %d", from, to, amt)))
	})
	b.record(mark, "transfer", err)
}

// increment adds one to the counter if it still holds what a plain read
// found (TxnIf), with the increment's marker.
func (b *faultBank) increment() {
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	v, err := b.c.Get(ctx, []byte(ctrKey))
	if err != nil {
		b.count("counter read failed")
		return
	}
	n, _ := strconv.Atoi(string(v))
	mark := incrMarkerKey(b.ids.Add(1))
	then := client.Branch{Ops: []client.Op{{Key: []byte(ctrKey), Value: []byte(strconv.Itoa(n + 1))}, {Key: mark, Value: []byte(strconv.Itoa(n + 1))}}}
	res, err := b.c.TxnIf(ctx, []client.Compare{{Key: []byte(ctrKey), Op: client.Equal, Value: v}}, then, client.Branch{})
	if err == nil && !res.Succeeded {
		b.mu.Lock()
		b.answers[string(mark)], b.answeredAt[string(mark)] = answeredNot, time.Now()
		b.counts["increment compare failed"]++
		b.mu.Unlock()
		return
	}
	b.record(mark, "increment", err)
}

// audit sums the accounts with Tx.Scan and writes the sum it saw; every
// attempt must see the total (its scan is at one timestamp).
func (b *faultBank) audit() {
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	err := b.c.Txn(ctx, func(tx *client.Tx) error {
		kvs, err := tx.Scan(ctx, []byte("acct-"), []byte("acct-z"), 0)
		if err != nil {
			return err
		}
		if total, n := sumAccounts(kvs); total != bankAccounts*bankStart || n != bankAccounts {
			b.violation("an audit's Tx.Scan at %s saw %d accounts holding %d, want %d holding %d",
				tx.ReadTimestamp(), n, total, bankAccounts, bankAccounts*bankStart)
		}
		return tx.Put(ctx, []byte("audit"), []byte(strconv.Itoa(bankAccounts*bankStart)))
	})
	b.record(nil, "audit", err)
}

// snapshotTotal checks the total in one snapshot scan.
func (b *faultBank) snapshotTotal() {
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	total, at, err := bankTotal(ctx, b.c)
	switch {
	case err != nil:
		b.count("snapshot scan failed") // waited too long for an intent, or cut off by a fault
	case total != bankAccounts*bankStart:
		b.violation("snapshot scan at %s: total %d, want %d", at, total, bankAccounts*bankStart)
	default:
		b.count("snapshot scan")
	}
	time.Sleep(20 * time.Millisecond)
}

// checkLedger reads every account and marker once the faults healed:
// every acknowledged transfer and increment is there, no given-up one is,
// and the balances and the counter are exactly what the markers add up to.
func (b *faultBank) checkLedger() {
	t := b.t
	kvs, err := b.c.Scan(b.ctx, []byte("acct-"), []byte("acct-z"), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctrs, err := b.c.Scan(b.ctx, []byte(ctrKey), []byte(ctrKey+"0"), 0)
	if err != nil {
		t.Fatal(err)
	}
	want, got := map[string]int{}, map[string]int{}
	for i := range bankAccounts {
		want[string(acct(i))] = bankStart
	}
	committed := map[string]bool{}
	incrs, counter := 0, -1
	byValue := map[string][]string{} // the increments' markers by the value they wrote
	for _, kv := range append(kvs, ctrs...) {
		k := string(kv.Key)
		switch {
		case strings.HasPrefix(k, ctrKey+"/x"):
			committed[k] = true
			incrs++
			byValue[string(kv.Value)] = append(byValue[string(kv.Value)], k)
		case isMarker(kv.Key):
			committed[k] = true
			var from, to, amt int
			if _, err := fmt.Sscanf(string(kv.Value), "%d %d %d", &from, &to, &amt); err != nil {
				t.Fatalf("marker %s = %q: %v", k, kv.Value, err)
			}
			want[string(acct(from))] -= amt
			want[string(acct(to))] += amt
		case k == ctrKey:
			counter, _ = strconv.Atoi(string(kv.Value))
		default:
			got[k], _ = strconv.Atoi(string(kv.Value))
		}
	}
	b.checkOutcomes(committed)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("balances %v, but the committed transfers' markers add up to %v", got, want)
	}
	if counter != incrs {
		t.Errorf("the counter holds %d, but %d increments' markers committed", counter, incrs)
		b.logSameValue(byValue)
	}
}

// checkOutcomes compares the committed markers with what clients were
// answered.
func (b *faultBank) checkOutcomes(committed map[string]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lost, phantom := 0, 0
	for k, o := range b.answers {
		switch {
		case o == answeredCommitted && !committed[k]:
			lost++
			b.t.Errorf("%s was acknowledged, and its marker is not there: a commit lost", k)
		case o == answeredNot && committed[k]:
			phantom++
			b.t.Errorf("%s gave up (or its compare failed), and its marker is there: it committed", k)
		case o == answeredUnknown && committed[k]:
			b.counts["unknown outcome: committed"]++
		case o == answeredUnknown:
			b.counts["unknown outcome: not committed"]++
		}
	}
	for k := range committed {
		if _, ok := b.answers[k]; !ok {
			b.t.Errorf("marker %s committed, but no client was answered for it", k)
		}
	}
}

func (b *faultBank) logCounts() {
	b.mu.Lock()
	defer b.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(b.counts)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, b.counts[k]))
	}
	one := txnCommits(b.tc, "one_phase") + b.commitsGone["one_phase"]
	two := txnCommits(b.tc, "two_phase") + b.commitsGone["two_phase"]
	b.t.Logf("commits coordinated: %d in one phase, %d in two; %s", one, two, strings.Join(parts, ", "))
	if len(b.others) > 0 {
		b.t.Logf("errors other than ambiguity (outcome unknown): %s", strings.Join(b.others, " | "))
	}
	if one == 0 || two == 0 {
		b.t.Errorf("commits: %d in one phase, %d in two; want both paths taken", one, two)
	}
}

// faultKinds are the schedule's faults, each once a round, in an order the
// seed picks.
var faultKinds = []string{"split", "merge", "move", "lease", "partition", "skew", "kill"}

// runSchedule runs rounds of faults, with transfers running between and
// during them, for runFor (at least one round), and returns the rounds.
func (b *faultBank) runSchedule(runFor time.Duration) int {
	rng := rand.New(rand.NewSource(b.seed))
	end := time.Now().Add(runFor)
	rounds := 0
	for ; rounds == 0 || time.Now().Before(end); rounds++ {
		order := slices.Clone(faultKinds)
		if only := os.Getenv("TIDEKV_TXNFAULTS_KINDS"); only != "" {
			order = strings.Split(only, ",") // to narrow down what a failure needs
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, kind := range order {
			time.Sleep(time.Duration(200+rng.Intn(300)) * time.Millisecond)
			// Each fault draws its choices once, so a retry makes the same.
			pick := rng.Int63()
			b.note("%s begins", kind)
			what := retryFault(b.t, 20*time.Second, kind, func() (string, error) {
				return b.fault(kind, rand.New(rand.NewSource(pick)))
			})
			b.t.Logf("fault %s: %s", kind, what)
			b.note("%s: %s", kind, what)
			b.count("fault " + kind)
		}
	}
	return rounds
}

// fault makes one fault of kind and says what it did.
func (b *faultBank) fault(kind string, rng *rand.Rand) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	tc, c := b.tc, b.c
	d, err := rangeAt(ctx, c, acct(rng.Intn(bankAccounts)))
	if err != nil {
		return "", err
	}
	node := rng.Intn(len(tc.nodes))
	switch kind {
	case "split", "merge":
		return b.splitOrMerge(ctx, kind, rng)
	case "move":
		from, to, err := tc.moveAnyReplica(ctx, b.t, c, rng, d.GetRangeId())
		return fmt.Sprintf("range %d's replica moved from node %d to %d", d.GetRangeId(), from, to), err
	case "lease":
		to, err := tc.transferLease(ctx, b.t, c, rng, d.GetRangeId())
		return fmt.Sprintf("range %d's lease moved to node %d", d.GetRangeId(), to), err
	case "partition":
		b.faults.parts[node].Isolate()
		time.Sleep(1500 * time.Millisecond)
		b.faults.parts[node].Heal()
		return fmt.Sprintf("node %d cut off for 1.5s, healed", tc.nodes[node].NodeID()), nil
	case "skew":
		off := tc.cfgs[node].Raft.MaxClockOffset / 2 * time.Duration(1-2*rng.Intn(2))
		b.faults.clocks[node].Set(off)
		time.Sleep(1500 * time.Millisecond)
		b.faults.clocks[node].Set(0)
		return fmt.Sprintf("node %d's clock %v off for 1.5s", tc.nodes[node].NodeID(), off), nil
	case "kill":
		return b.killBusiest(ctx)
	}
	return "", fmt.Errorf("no fault %q", kind)
}

// splitOrMerge splits the accounts at an account that starts no range,
// or merges two of their ranges at an account that starts one.
func (b *faultBank) splitOrMerge(ctx context.Context, kind string, rng *rand.Rand) (string, error) {
	var starts, others []int
	for i := 1; i < bankAccounts; i++ {
		d, err := rangeAt(ctx, b.c, acct(i))
		if err != nil {
			return "", err
		}
		if bytes.Equal(d.GetStartKey(), acct(i)) {
			starts = append(starts, i)
		} else {
			others = append(others, i)
		}
	}
	if kind == "split" || len(starts) == 0 {
		if len(others) == 0 {
			// Cannot happen while each round merges as often as it splits.
			return "", fmt.Errorf("every account starts a range")
		}
		k := others[rng.Intn(len(others))]
		if _, err := b.c.Split(ctx, acct(k)); err != nil || kind == "split" {
			return fmt.Sprintf("split at %s", acct(k)), err
		}
		starts = []int{k}
	}
	k := starts[rng.Intn(len(starts))]
	moves, err := b.tc.mergeAt(ctx, b.t, b.c, acct(k))
	return fmt.Sprintf("merged at %s after %d replica moves", acct(k), moves), err
}

// killBusiest kills the node that has coordinated the most commits (the
// first node a client tries for each transaction), so transactions are in
// flight on it, and restarts it once their records have expired.
func (b *faultBank) killBusiest(ctx context.Context) (string, error) {
	busiest, most := 0, -1.0
	for i, s := range b.tc.nodes {
		n := promtest.ToFloat64(s.metrics.TxnCommits.WithLabelValues("one_phase")) + promtest.ToFloat64(s.metrics.TxnCommits.WithLabelValues("two_phase"))
		if n > most {
			busiest, most = i, n
		}
	}
	s := b.tc.nodes[busiest]
	for _, path := range []string{"one_phase", "two_phase"} {
		b.commitsGone[path] += int(promtest.ToFloat64(s.metrics.TxnCommits.WithLabelValues(path)))
	}
	// Kill it in the middle of transactions: some open on it, and, as they
	// commit one after the other, likely one committing.
	open := 0
	for start := time.Now(); open < 2 && time.Since(start) < 2*time.Second; time.Sleep(time.Millisecond) {
		open = s.txn.coord.Open()
	}
	cutBefore := b.cutOff()
	eng := b.tc.kill(busiest, b.faults.parts[busiest])
	down := 2 * b.tc.cfgs[busiest].Txn.Expiry
	time.Sleep(down)
	b.tc.restartOn(ctx, busiest, eng)
	return fmt.Sprintf("node %d (%.0f commits coordinated) killed with %d transactions open on it, restarted %v later; %d transactions answered ambiguous or failed meanwhile",
		s.NodeID(), most, open, down, b.cutOff()-cutBefore), nil
}

// cutOff counts the transactions answered ambiguous or failed so far.
func (b *faultBank) cutOff() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for what, c := range b.counts {
		if strings.HasSuffix(what, " ambiguous") || strings.HasSuffix(what, " failed otherwise") {
			n += c
		}
	}
	return n
}

// logSameValue logs the increments that committed the same value (each
// saw the counter before the other's write: a lost update), when they
// were answered, and the faults' timeline.
func (b *faultBank) logSameValue(byValue map[string][]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for v, ks := range byValue {
		if len(ks) < 2 {
			continue
		}
		var at []string
		for _, k := range ks {
			at = append(at, fmt.Sprintf("%s answered %d at %s", k, b.answers[k], b.answeredAt[k].Format("15:04:05.000")))
		}
		b.t.Logf("increments that both wrote %s: %s", v, strings.Join(at, "; "))
	}
	b.t.Logf("faults: %s", strings.Join(b.timeline, " | "))
}
