package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of one bank run's parts, so that a cluster that stops answering
// cannot hold the benchmark past them.
const (
	// bankTxnTimeout bounds one transfer, the client's retries included.
	bankTxnTimeout = 30 * time.Second
	// bankCheckTimeout bounds one snapshot read of every account.
	bankCheckTimeout = 10 * time.Second
	// bankFinalCheckWithin bounds the tries of the final check: a
	// transaction lost with its coordinator leaves intents that others
	// may abort only after the expiry (5 s by default).
	bankFinalCheckWithin = 30 * time.Second
	// bankMaxAmount is the largest amount one transfer moves.
	bankMaxAmount = 10
)

// StoppedInvariant ends a run whose checker found the invariant broken.
const StoppedInvariant = "invariant"

// bankKey is account i's key; the fixed width keeps the accounts in
// number order, so a scan from account 0 to account N reads exactly them.
func bankKey(i int) []byte { return fmt.Appendf(nil, "bench-bank/%08d", i) }

// RunTxn splits and loads the accounts, runs cfg's workload from
// cfg.Workers workers until cfg.Duration (or cfg.Transfers) while a checker
// reads every account at one timestamp each cfg.CheckInterval, and checks
// once more at the end. A broken invariant is in the result
// (InvariantOK false), not an error. If ctx ends first, the run stops,
// the end is still checked, and the result comes with ctx's error.
func RunTxn(ctx context.Context, cfg TxnBenchConfig, store TxnStore, progress io.Writer) (*TxnBenchResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &bank{cfg: cfg.resolved(), store: store, want: int64(cfg.Accounts) * cfg.InitialBalance}
	if err := b.setup(ctx, progress); err != nil {
		return nil, err
	}
	res := b.run(ctx, newProgress(progress, "bank"))
	b.finalCheck(context.WithoutCancel(ctx))
	b.summarizeChecks(res)
	return res, ctx.Err()
}

// bank is one run's shared state.
type bank struct {
	cfg   TxnBenchConfig
	store TxnStore
	want  int64 // the accounts' total

	checks, checkErrs atomic.Int64
	// violation is the first broken invariant, or why the end could not
	// be checked; written by the checker, then by the final check.
	violation error
	lastCheck error // the last failed read, for the report
}

// setup splits the accounts' span into cfg.Ranges ranges at evenly spaced
// account keys, then writes every account's opening balance.
func (b *bank) setup(ctx context.Context, progress io.Writer) error {
	logf := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, format+"\n", args...)
		}
	}
	logf("bank: splitting %d accounts into %d ranges", b.cfg.Accounts, b.cfg.Ranges)
	for q := range b.cfg.Ranges {
		key := bankKey(q * b.cfg.Accounts / b.cfg.Ranges)
		if err := b.store.Split(ctx, key); err != nil {
			return fmt.Errorf("bench txn: split the accounts at %q: %w", key, err)
		}
	}
	logf("bank: loading %d accounts of %d", b.cfg.Accounts, b.cfg.InitialBalance)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, b.cfg.Workers)
	balance := strconv.AppendInt(nil, b.cfg.InitialBalance, 10)
	for w := range errs {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < b.cfg.Accounts && errs[w] == nil; i = int(next.Add(1) - 1) {
				if err := b.store.Put(ctx, bankKey(i), balance); err != nil {
					errs[w] = fmt.Errorf("bench txn: load account %d: %w", i, err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bankWorker is one worker's state; only its goroutine touches it but
// for the progress counters in worker.
type bankWorker struct {
	*worker // progress counters and the timeline's current second
	rng     *rand.Rand
	hist    histogram // latencies of committed transfers, ns

	committed, aborted, errors, retries int64
	firstErr                            error
}

// run runs the transfers and the checker until the duration, the count,
// a broken invariant or ctx ends it.
func (b *bank) run(ctx context.Context, p *progress) *TxnBenchResult {
	var stop atomic.Bool
	var started atomic.Int64
	timer := time.AfterFunc(b.cfg.Duration, func() { stop.Store(true) })
	defer timer.Stop()
	stopOnCancel := context.AfterFunc(ctx, func() { stop.Store(true) })
	defer stopOnCancel()

	start := time.Now()
	tl := &timeline{begin: start}
	workers := make([]*bankWorker, b.cfg.Workers)
	progressWorkers := make([]*worker, len(workers))
	for i := range workers {
		progressWorkers[i] = &worker{tl: tl}
		workers[i] = &bankWorker{worker: progressWorkers[i], rng: rand.New(rand.NewPCG(b.cfg.Seed, runStream+uint64(i)))}
	}
	p.note = func() string { return fmt.Sprintf("%d invariant checks", b.checks.Load()) }
	p.start(start, b.cfg.Transfers, b.cfg.Duration, progressWorkers)
	checkerDone := make(chan struct{})
	go b.checker(ctx, &stop, checkerDone)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for !stop.Load() && !w.canceled {
				if b.cfg.Transfers > 0 && started.Add(1) > b.cfg.Transfers {
					return
				}
				w.transfer(ctx, b)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop.Store(true)
	<-checkerDone
	for _, w := range workers {
		tl.flush(w.worker)
	}
	p.stop(time.Now())

	res := b.summarize(workers, elapsed)
	res.Timeline = tl.points(elapsed)
	switch {
	case b.violation != nil:
		res.Stopped = StoppedInvariant
	case ctx.Err() != nil:
		res.Stopped = StoppedCanceled
	case b.cfg.Transfers > 0 && started.Load() > b.cfg.Transfers:
		res.Stopped = StoppedCompleted
	default:
		res.Stopped = StoppedDuration
	}
	return res
}

// transfer moves a random amount between two random accounts in one
// transaction and records how it went.
func (w *bankWorker) transfer(ctx context.Context, b *bank) {
	from, to := w.rng.IntN(b.cfg.Accounts), w.rng.IntN(b.cfg.Accounts-1)
	if to >= from {
		to++
	}
	amount := 1 + w.rng.Int64N(bankMaxAmount)
	tctx, cancel := context.WithTimeout(ctx, bankTxnTimeout)
	defer cancel()
	attempts := int64(0)
	begin := time.Now()
	err := b.store.Txn(tctx, func(tx TxnOps) error {
		attempts++
		return moveMoney(tctx, tx, bankKey(from), bankKey(to), amount)
	})
	lat := time.Since(begin)
	if err != nil && ctx.Err() != nil {
		w.canceled = true // interrupted: says nothing about the store
		return
	}
	w.retries += max(attempts-1, 0)
	w.tl.add(w.worker, begin.Add(lat), lat, err != nil)
	w.done.Add(1)
	switch {
	case err == nil:
		w.committed++
		w.hist.record(uint64(lat))
		return
	case errors.Is(err, ErrTxnConflict):
		w.aborted++
	default:
		w.errors++
		if w.firstErr == nil {
			w.firstErr = err
		}
	}
	w.errs.Add(1)
}

// moveMoney is one attempt of a transfer. Balances may go below zero:
// the invariant is the total, not each account.
func moveMoney(ctx context.Context, tx TxnOps, from, to []byte, amount int64) error {
	var bal [2]int64
	for i, k := range [][]byte{from, to} {
		v, err := tx.Get(ctx, k)
		if err != nil {
			return err
		}
		if bal[i], err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return fmt.Errorf("account %q holds %q, not a balance", k, v)
		}
	}
	if err := tx.Put(ctx, from, strconv.AppendInt(nil, bal[0]-amount, 10)); err != nil {
		return err
	}
	return tx.Put(ctx, to, strconv.AppendInt(nil, bal[1]+amount, 10))
}

// checker checks the invariant every CheckInterval until stop; a broken
// one stops the run.
func (b *bank) checker(ctx context.Context, stop *atomic.Bool, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(b.cfg.CheckInterval)
	defer t.Stop()
	for !stop.Load() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if stop.Load() {
			return
		}
		if violation, ok := b.checkOnce(ctx); ok && violation != nil {
			b.violation = violation
			stop.Store(true)
			return
		}
	}
}

// checkOnce reads every account at one timestamp and checks the total.
// ok is false when the read failed (counted; a snapshot read waits for a
// live transaction's intent only so long, then fails).
func (b *bank) checkOnce(ctx context.Context) (violation error, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, bankCheckTimeout)
	defer cancel()
	kvs, at, err := b.store.SnapshotScan(ctx, bankKey(0), bankKey(b.cfg.Accounts))
	if err != nil {
		b.checkErrs.Add(1)
		b.lastCheck = err
		return nil, false
	}
	b.checks.Add(1)
	return checkBankTotal(kvs, at, b.cfg.Accounts, b.want), true
}

// finalCheck checks the end, trying again for a while when the read
// fails; an end it could not read leaves the invariant unverified.
func (b *bank) finalCheck(ctx context.Context) {
	if b.violation != nil {
		return
	}
	deadline := time.Now().Add(bankFinalCheckWithin)
	for {
		violation, ok := b.checkOnce(ctx)
		if ok {
			b.violation = violation
			return
		}
		if time.Now().Add(b.cfg.CheckInterval).After(deadline) {
			b.violation = fmt.Errorf("the final check could not read the accounts within %v (%v), so the invariant is not verified", bankFinalCheckWithin, b.lastCheck)
			return
		}
		time.Sleep(b.cfg.CheckInterval)
	}
}

// checkBankTotal is the bank's invariant on one snapshot: every account
// is there, holds a number, and together they hold want.
func checkBankTotal(kvs []KeyValue, at string, accounts int, want int64) error {
	if len(kvs) != accounts {
		return fmt.Errorf("the snapshot at %s holds %d accounts, not %d", at, len(kvs), accounts)
	}
	var total int64
	for _, kv := range kvs {
		v, err := strconv.ParseInt(string(kv.Value), 10, 64)
		if err != nil {
			return fmt.Errorf("in the snapshot at %s account %q holds %q, not a balance", at, kv.Key, kv.Value)
		}
		total += v
	}
	if total != want {
		return fmt.Errorf("in the snapshot at %s the %d accounts hold %d in total, not %d: a transfer was lost or applied in part", at, accounts, total, want)
	}
	return nil
}
