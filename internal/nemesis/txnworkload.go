package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/txncheck"
)

// txnTimeout bounds one transaction of the workload, its retries
// included: past it the client gives up, and an attempt caught committing
// is of unknown outcome.
const txnTimeout = 10 * time.Second

// txnWorkload runs transactions of list appends or register writes and
// reads through a txnRunner (the Go client's Txn, or MULTI/EXEC over
// RESP), records them, and checks the history with txncheck. Its keys are
// split into ranges of their own, so that most transactions span ranges
// and commit in two phases (intents, a record, a refresh when pushed).
type txnWorkload struct {
	kind    txncheck.Workload
	keys    []string
	clients int
	seed    uint64
	rec     *txncheck.Recorder
	next    atomic.Int64 // the last value written: unique across keys
	runner  txnRunner
}

// txnRunner runs one transaction's mops as process and returns them with
// what its reads saw, and how it ended. ctx bounds it, retries included.
type txnRunner interface {
	runTxn(ctx context.Context, process int, mops []txncheck.Mop) ([]txncheck.Mop, txncheck.Outcome, error)
	// readsFirst: every read runs before any write (WATCH and GET, then
	// MULTI/EXEC), so transactions are generated in that order.
	readsFirst() bool
}

func newTxnWorkload(kind txncheck.Workload, keys, clients int, seed uint64, runner txnRunner) *txnWorkload {
	w := &txnWorkload{kind: kind, clients: clients, seed: seed, rec: txncheck.NewRecorder(), runner: runner}
	for i := range keys {
		w.keys = append(w.keys, fmt.Sprintf("txn/k%d", i))
	}
	return w
}

// splitKeys gives each key after the first a range of its own and waits
// for full replication.
func (w *txnWorkload) splitKeys(ctx context.Context, cl *client.Client) error {
	for _, k := range w.keys[1:] {
		if _, err := cl.Split(ctx, []byte(k)); err != nil {
			return fmt.Errorf("splitting at %s: %w", k, err)
		}
	}
	if _, err := awaitReplicated(ctx, cl, time.Now(), time.Minute, false); err != nil {
		return fmt.Errorf("after splitting the workload's keys: %w", err)
	}
	return nil
}

// gen is one transaction of 1 to 4 steps on random keys. A list step reads
// a key or appends to it; an append reads the list first (it is a read,
// then a write of the longer list, and the history says so). A register
// step reads a key, writes it, or reads then writes it.
func (w *txnWorkload) gen(rng *rand.Rand) []txncheck.Mop {
	var mops []txncheck.Mop
	for range 1 + rng.IntN(4) {
		k := w.keys[rng.IntN(len(w.keys))]
		r := txncheck.Mop{F: txncheck.Read, Key: k}
		switch n := rng.IntN(3); {
		case n == 0:
			mops = append(mops, r)
		case w.kind == txncheck.ListAppend:
			mops = append(mops, r, txncheck.Mop{F: txncheck.Append, Key: k, Value: int(w.next.Add(1))})
		case n == 1:
			mops = append(mops, txncheck.Mop{F: txncheck.Write, Key: k, Value: int(w.next.Add(1))})
		default:
			mops = append(mops, r, txncheck.Mop{F: txncheck.Write, Key: k, Value: int(w.next.Add(1))})
		}
	}
	return mops
}

// run runs mops as one transaction of process and records it; the error
// is why it did not commit.
func (w *txnWorkload) run(ctx context.Context, process int, mops []txncheck.Mop) (txncheck.Outcome, error) {
	if w.runner.readsFirst() {
		mops = slices.Concat(
			slices.DeleteFunc(slices.Clone(mops), func(m txncheck.Mop) bool { return m.F != txncheck.Read }),
			slices.DeleteFunc(slices.Clone(mops), func(m txncheck.Mop) bool { return m.F == txncheck.Read }))
	}
	id := w.rec.Invoke(process, mops)
	ctx, cancel := context.WithTimeout(ctx, txnTimeout)
	defer cancel()
	done, o, err := w.runner.runTxn(ctx, process, mops)
	w.rec.Complete(id, o, done)
	return o, err
}

// goTxns runs transactions through the Go client's Txn.
type goTxns struct {
	cl   *client.Client
	kind txncheck.Workload
}

func (g goTxns) readsFirst() bool { return false }

func (g goTxns) runTxn(ctx context.Context, _ int, mops []txncheck.Mop) ([]txncheck.Mop, txncheck.Outcome, error) {
	var done []txncheck.Mop
	committing := false
	err := g.cl.Txn(ctx, func(tx *client.Tx) error {
		committing, done = false, slices.Clone(mops)
		lists := map[string][]int{} // each list as the attempt last saw it
		for i, m := range done {
			var err error
			if done[i], err = g.step(ctx, tx, m, lists); err != nil {
				return err
			}
		}
		committing = true
		return nil
	})
	switch {
	case err == nil:
		return done, txncheck.OK, nil
	case !committing || errors.Is(err, client.ErrTxnRetry):
		return done, txncheck.Fail, err // rolled back, or refused at the commit
	}
	return done, txncheck.Info, err // the commit's answer was lost
}

// step does m in tx and returns it with what a read saw; lists holds
// the lists read and appended to so far (an append follows a read of its
// key: gen).
func (g goTxns) step(ctx context.Context, tx *client.Tx, m txncheck.Mop, lists map[string][]int) (txncheck.Mop, error) {
	key := []byte(m.Key)
	switch m.F {
	case txncheck.Write:
		return m, tx.Put(ctx, key, []byte(strconv.Itoa(m.Value)))
	case txncheck.Append:
		l := append(slices.Clip(lists[m.Key]), m.Value)
		lists[m.Key] = l
		return m, tx.Put(ctx, key, encodeList(l))
	}
	r, err := tx.GetVersion(ctx, key)
	if err != nil {
		return m, err
	}
	if g.kind == txncheck.ListAppend {
		m.List, err = decodeList(r.Value)
		lists[m.Key] = m.List
		return m, err
	}
	if r.Found {
		m.Value, err = strconv.Atoi(string(r.Value))
	}
	return m, err
}

func encodeList(l []int) []byte {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = strconv.Itoa(v)
	}
	return []byte(strings.Join(s, ","))
}

// decodeList reads a list written whole by encodeList, or appended to
// value by value, each with a comma after it (the RESP workload's APPEND).
func decodeList(b []byte) ([]int, error) {
	l := []int{}
	for _, s := range strings.Split(string(b), ",") {
		if s == "" {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("a list value %q: %w", b, err)
		}
		l = append(l, v)
	}
	return l, nil
}

func (w *txnWorkload) keySpace() []string { return w.keys }

// start splits the keys, then runs the clients until the returned func
// stops them.
func (w *txnWorkload) start(ctx context.Context, cl *client.Client, ops *tally) (stop func(), err error) {
	if err := w.splitKeys(ctx, cl); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range w.clients {
		rng := rand.New(rand.NewPCG(w.seed, uint64(i)))
		wg.Go(func() {
			for wctx.Err() == nil {
				o, _ := w.run(wctx, i, w.gen(rng))
				ops.add(o == txncheck.OK)
			}
		})
	}
	return func() { cancel(); wg.Wait() }, nil
}

// finalReadsWithin bounds the retries of a final read. A node whose
// clock was skewed ahead beyond the max offset keeps its HLC ahead until
// real time catches up, and until then its transactions' timestamps are
// refused by the others (a refusal, not an anomaly): a read retried at
// once, five times, failed so (seed 1, skews of ±1 s).
const finalReadsWithin = 20 * time.Second

// finish reads every key once more, after recovery, each in a
// transaction, trying again every 250 ms for up to finalReadsWithin a
// read that did not commit (a read changes nothing); then it checks the
// history into rep.
func (w *txnWorkload) finish(ctx context.Context, cl *client.Client, rep *Report) (string, error) {
	process := w.clients
	for _, k := range w.keys {
		o, err := txncheck.Fail, error(nil)
		for end := time.Now().Add(finalReadsWithin); o != txncheck.OK && time.Now().Before(end); {
			if o, err = w.run(ctx, process, []txncheck.Mop{{F: txncheck.Read, Key: k}}); o != txncheck.OK && sleep(ctx, 250*time.Millisecond) != nil {
				break
			}
		}
		if o != txncheck.OK {
			return "", fmt.Errorf("the final read of %s after recovery did not commit: %w", k, err)
		}
	}
	rep.FinalReads = len(w.keys)
	res, err := txncheck.Check(w.kind, w.rec.History())
	if err != nil {
		return "", err
	}
	rep.Committed, rep.Anomalies, rep.AnomalyKinds = res.Committed, len(res.Anomalies), res.Kinds()
	if s := res.Smallest(); s != nil {
		rep.SmallestAnomaly = s.Explanation
	}
	return res.Describe(), nil
}
