package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of one run's parts, so that a cluster that stops answering
// cannot hold the benchmark past them.
const (
	// txnTimeout bounds one transaction, the client's retries included.
	txnTimeout = 30 * time.Second
	// txnCheckTimeout bounds one snapshot read of the checked span.
	txnCheckTimeout = 10 * time.Second
	// txnFinalCheckWithin bounds the tries of the final check: a
	// transaction lost with its coordinator leaves intents that others
	// may abort only after the expiry (5 s by default).
	txnFinalCheckWithin = 30 * time.Second
)

// StoppedInvariant ends a run whose checker found the invariant broken.
const StoppedInvariant = "invariant"

// txnWorkload is what a workload brings to a run.
type txnWorkload interface {
	// setup splits and loads the workload's keys.
	setup(ctx context.Context, store TxnStore, logf func(format string, args ...any)) error
	// next draws a worker's next transaction: one attempt of it.
	next(rng *rand.Rand) func(ctx context.Context, tx TxnOps) error
	// span is what the checker reads at one timestamp.
	span() (start, end []byte)
	// check is the invariant on one snapshot of span, taken at at.
	check(kvs []KeyValue, at string) error
}

// RunTxn splits and loads cfg's workload, runs its transactions from
// cfg.Workers workers until cfg.Duration (or cfg.Transactions) while a
// checker reads the workload's keys at one timestamp each
// cfg.CheckInterval, and checks once more at the end. A broken invariant
// is in the result (InvariantOK false), not an error. If ctx ends first,
// the run stops, the end is still checked, and the result comes with
// ctx's error.
func RunTxn(ctx context.Context, cfg TxnBenchConfig, store TxnStore, progress io.Writer) (*TxnBenchResult, error) {
	return runTxn(ctx, cfg, store, progress, wallTimers{})
}

// runTxn is RunTxn on the given timers.
func runTxn(ctx context.Context, cfg TxnBenchConfig, store TxnStore, progress io.Writer, timers txnTimers) (*TxnBenchResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.resolved()
	r := &txnRun{cfg: cfg, store: store, wl: newTxnWorkload(cfg), timers: timers}
	logf := func(format string, args ...any) {
		if progress != nil {
			fmt.Fprintf(progress, cfg.Workload+": "+format+"\n", args...)
		}
	}
	if err := r.wl.setup(ctx, store, logf); err != nil {
		return nil, err
	}
	res := r.run(ctx, newProgress(progress, cfg.Workload))
	r.finalCheck(context.WithoutCancel(ctx))
	r.summarizeChecks(res)
	return res, ctx.Err()
}

func newTxnWorkload(cfg TxnBenchConfig) txnWorkload {
	if cfg.Workload == WorkloadTPCCLite {
		return tpccLite{warehouses: cfg.Warehouses, ranges: cfg.Ranges, loaders: cfg.Workers}
	}
	return bank{accounts: cfg.Accounts, balance: cfg.InitialBalance, ranges: cfg.Ranges, loaders: cfg.Workers}
}

// txnTimers end a run and pace its checker. Tests move them by hand: on
// the wall clock, how many checks fit in a short run is whatever the
// machine's scheduler allows.
type txnTimers interface {
	// afterFunc calls f once d has passed; stop cancels that.
	afterFunc(d time.Duration, f func()) (stop func() bool)
	// ticker ticks every d until stop.
	ticker(d time.Duration) (c <-chan time.Time, stop func())
}

// wallTimers are txnTimers on the wall clock.
type wallTimers struct{}

func (wallTimers) afterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (wallTimers) ticker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// txnRun is one run's shared state.
type txnRun struct {
	cfg    TxnBenchConfig
	store  TxnStore
	wl     txnWorkload
	timers txnTimers

	checks, checkErrs atomic.Int64
	// violation is the first broken invariant, or why the end could not
	// be checked; written by the checker, then by the final check.
	violation error
	lastCheck error // the last failed read, for the report
}

// splitAt makes each of keys the start of a range.
func splitAt(ctx context.Context, store TxnStore, keys [][]byte) error {
	for _, k := range keys {
		if err := store.Split(ctx, k); err != nil {
			return fmt.Errorf("bench txn: split at %q: %w", k, err)
		}
	}
	return nil
}

// inParallel calls fn(i) for every i in [0, n) from workers goroutines
// and stops at the first error each meets.
func inParallel(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range errs {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && errs[w] == nil; i = int(next.Add(1) - 1) {
				errs[w] = fn(i)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadKeys writes the n pairs kv returns from loaders goroutines, outside
// transactions.
func loadKeys(ctx context.Context, store TxnStore, loaders, n int, kv func(i int) (key, value []byte)) error {
	return inParallel(loaders, n, func(i int) error {
		k, v := kv(i)
		if err := store.Put(ctx, k, v); err != nil {
			return fmt.Errorf("bench txn: load %q: %w", k, err)
		}
		return nil
	})
}

// txnWorker is one worker's state; only its goroutine touches it but
// for the progress counters in worker.
type txnWorker struct {
	*worker // progress counters and the timeline's current second
	rng     *rand.Rand
	hist    histogram // latencies of committed transactions, ns

	committed, aborted, errors, retries int64
	firstErr                            error
}

// run runs the transactions and the checker until the duration, the
// count, a broken invariant or ctx ends it.
func (r *txnRun) run(ctx context.Context, p *progress) *TxnBenchResult {
	var stop atomic.Bool
	var started atomic.Int64
	stopTimer := r.timers.afterFunc(r.cfg.Duration, func() { stop.Store(true) })
	defer stopTimer()
	stopOnCancel := context.AfterFunc(ctx, func() { stop.Store(true) })
	defer stopOnCancel()

	start := time.Now()
	tl := &timeline{begin: start}
	workers := make([]*txnWorker, r.cfg.Workers)
	progressWorkers := make([]*worker, len(workers))
	for i := range workers {
		progressWorkers[i] = &worker{tl: tl}
		workers[i] = &txnWorker{worker: progressWorkers[i], rng: rand.New(rand.NewPCG(r.cfg.Seed, runStream+uint64(i)))}
	}
	p.note = func() string { return fmt.Sprintf("%d invariant checks", r.checks.Load()) }
	p.start(start, r.cfg.Transactions, r.cfg.Duration, progressWorkers)
	checkerDone := make(chan struct{})
	go r.checker(ctx, &stop, checkerDone)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for !stop.Load() && !w.canceled {
				if r.cfg.Transactions > 0 && started.Add(1) > r.cfg.Transactions {
					return
				}
				w.runOne(ctx, r)
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

	res := r.summarize(workers, elapsed)
	res.Timeline = tl.points(elapsed)
	switch {
	case r.violation != nil:
		res.Stopped = StoppedInvariant
	case ctx.Err() != nil:
		res.Stopped = StoppedCanceled
	case r.cfg.Transactions > 0 && started.Load() > r.cfg.Transactions:
		res.Stopped = StoppedCompleted
	default:
		res.Stopped = StoppedDuration
	}
	return res
}

// runOne runs the workload's next transaction and records how it went.
func (w *txnWorker) runOne(ctx context.Context, r *txnRun) {
	attempt := r.wl.next(w.rng)
	tctx, cancel := context.WithTimeout(ctx, txnTimeout)
	defer cancel()
	attempts := int64(0)
	begin := time.Now()
	err := r.store.Txn(tctx, func(tx TxnOps) error {
		attempts++
		return attempt(tctx, tx)
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

// checker checks the invariant every CheckInterval until stop; a broken
// one stops the run.
func (r *txnRun) checker(ctx context.Context, stop *atomic.Bool, done chan<- struct{}) {
	defer close(done)
	ticks, stopTicks := r.timers.ticker(r.cfg.CheckInterval)
	defer stopTicks()
	for !stop.Load() {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		if stop.Load() {
			return
		}
		if violation, ok := r.checkOnce(ctx); ok && violation != nil {
			r.violation = violation
			stop.Store(true)
			return
		}
	}
}

// checkOnce reads the workload's keys at one timestamp and checks them.
// ok is false when the read failed (counted; a snapshot read waits for a
// live transaction's intent only so long, then fails).
func (r *txnRun) checkOnce(ctx context.Context) (violation error, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, txnCheckTimeout)
	defer cancel()
	start, end := r.wl.span()
	kvs, at, err := r.store.SnapshotScan(ctx, start, end)
	if err != nil {
		r.checkErrs.Add(1)
		r.lastCheck = err
		return nil, false
	}
	r.checks.Add(1)
	return r.wl.check(kvs, at), true
}

// finalCheck checks the end, trying again for a while when the read
// fails; an end it could not read leaves the invariant unverified.
func (r *txnRun) finalCheck(ctx context.Context) {
	if r.violation != nil {
		return
	}
	deadline := time.Now().Add(txnFinalCheckWithin)
	for {
		violation, ok := r.checkOnce(ctx)
		if ok {
			r.violation = violation
			return
		}
		if time.Now().Add(r.cfg.CheckInterval).After(deadline) {
			r.violation = fmt.Errorf("the final check could not read the %s keys within %v (%v), so the invariant is not verified", r.cfg.Workload, txnFinalCheckWithin, r.lastCheck)
			return
		}
		time.Sleep(r.cfg.CheckInterval)
	}
}
