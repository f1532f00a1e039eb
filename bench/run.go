package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Stream salts keep the load and run phases' random streams apart for the
// same seed and goroutine index.
const (
	loadStream = 1 << 32
	runStream  = 2 << 32
)

// Run loads cfg.RecordCount records into store (unless cfg.SkipLoad), then
// runs cfg.OperationCount operations of cfg.Workload, writing live progress
// to progress (nil for none). If ctx is cancelled it stops, waits for the
// operations in flight and returns the partial Result with ctx's error;
// operations that failed because of the cancellation are not counted.
func Run(ctx context.Context, cfg Config, store Store, progress io.Writer) (*Result, error) {
	return RunWithCost(ctx, cfg, store, progress, nil)
}

// RunWithCost is Run that also reports each phase's cost on the servers:
// probe is sampled right before and right after each phase (nil: no cost).
func RunWithCost(ctx context.Context, cfg Config, store Store, progress io.Writer, probe Probe) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("bench: nil store")
	}
	cfg = cfg.resolved()
	b := newBenchmark(cfg, store)
	b.probe = probe
	res := &Result{Config: cfg}
	if !cfg.SkipLoad {
		res.Load = b.load(ctx, newProgress(progress, "load"))
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Run = b.run(ctx, newProgress(progress, "run"))
	if res.Run.Stopped == StoppedCanceled {
		return res, ctx.Err()
	}
	return res, nil
}

// benchmark is one Run's shared, read-mostly state.
type benchmark struct {
	cfg   Config
	wl    workload
	store Store
	probe Probe // nil: cost not measured

	loadSeq   atomic.Int64 // next record number to load
	insertSeq *ackCounter  // run-phase insert key numbers

	// Zeta sums, computed once and shared by every goroutine's generators.
	zipfianMax   int64   // upper bound of the zipfian key chooser
	zipfianZetan float64 // zeta over its items when theta != 0.99
	latestZetan  float64 // zeta(RecordCount-1): the latest chooser's start
}

func newBenchmark(cfg Config, store Store) *benchmark {
	wl, _ := lookupWorkload(cfg.Workload)
	b := &benchmark{cfg: cfg, wl: wl, store: store, insertSeq: newAckCounter(cfg.RecordCount)}
	theta := cfg.ZipfianConstant
	switch cfg.Distribution {
	case Zipfian:
		// As YCSB's CoreWorkload: leave room for twice the expected
		// inserts, so new keys get their share once they exist; draws
		// above the acknowledged limit are redrawn.
		expectedNew := int64(float64(cfg.OperationCount) * wl.insertProportion() * 2)
		b.zipfianMax = cfg.RecordCount + expectedNew - 1
		if theta != ycsbZipfianConstant {
			b.zipfianZetan = zeta(0, b.zipfianMax+1, theta, 0)
		}
	case Latest:
		b.latestZetan = zeta(0, b.insertSeq.last(), theta, 0)
	}
	return b
}

// keyChooser returns a new generator of existing record numbers for the
// configured distribution, drawing from rng.
func (b *benchmark) keyChooser(rng *rand.Rand) intGenerator {
	cfg := b.cfg
	switch cfg.Distribution {
	case Uniform:
		return newUniform(rng, 0, cfg.RecordCount-1)
	case Hotspot:
		return newHotspot(rng, 0, cfg.RecordCount-1, cfg.HotspotDataFraction, cfg.HotspotOpnFraction)
	case Latest:
		return newSkewedLatest(rng, b.insertSeq, cfg.ZipfianConstant, b.latestZetan)
	default:
		return &boundedGen{
			g:     newScrambledZipfian(rng, 0, b.zipfianMax, cfg.ZipfianConstant, b.zipfianZetan),
			limit: b.insertSeq,
		}
	}
}

// boundedGen redraws numbers above the acknowledged insert limit, as
// YCSB's CoreWorkload.nextKeynum does.
type boundedGen struct {
	g     intGenerator
	limit *ackCounter
}

func (g *boundedGen) next() int64 {
	for {
		if n := g.g.next(); n <= g.limit.last() {
			return n
		}
	}
}

// worker is one goroutine's state. Everything but the progress counters is
// touched only by its goroutine.
type worker struct {
	b        *benchmark
	rng      *rand.Rand
	quota    int64 // operations left; -1 for unbounded
	canceled bool  // an operation failed because ctx was cancelled
	stats    [numOpKinds]*opStats

	// The phase's per-second timeline and this worker's current second.
	tl  *timeline
	sec int
	cur secStats

	// Per-worker rather than shared counters, so that counting an
	// operation never contends; the progress printer sums them.
	done atomic.Int64
	errs atomic.Int64

	// Run phase choosers (nil in the load phase).
	ops     *opChooser
	keys    intGenerator
	scanLen *uniformGen

	key    []byte
	val    []byte
	fields [][]byte
}

// opStats accumulates one operation kind for one worker.
type opStats struct {
	hist     histogram // latencies of successful operations, ns
	errors   int64
	notFound int64
}

func (b *benchmark) newWorker(id int, stream uint64) *worker {
	return &worker{
		b:   b,
		rng: rand.New(rand.NewPCG(b.cfg.Seed, stream+uint64(id))),
	}
}

// finish records an operation that started at start. Errors caused by
// cancellation say nothing about the store and are dropped.
func (w *worker) finish(ctx context.Context, k opKind, start time.Time, found bool, err error) {
	lat := time.Since(start)
	if err != nil && ctx.Err() != nil {
		w.canceled = true
		return
	}
	w.tl.add(w, start.Add(lat), lat, err != nil)
	s := w.stats[k]
	if s == nil {
		// Allocated on first use: most workloads use two kinds.
		s = new(opStats)
		w.stats[k] = s
	}
	if err != nil {
		s.errors++
		w.errs.Add(1)
	} else {
		s.hist.record(uint64(lat))
		if !found {
			s.notFound++
		}
	}
	w.done.Add(1)
}

// appendRecord appends a fresh random record to dst.
func (w *worker) appendRecord(dst []byte) []byte {
	for range w.b.cfg.FieldCount {
		dst = w.appendRandomField(dst)
	}
	return dst
}

// appendRandomField appends one encoded field of random printable bytes.
func (w *worker) appendRandomField(dst []byte) []byte {
	n := w.b.cfg.FieldLength
	dst = binary.AppendUvarint(dst, uint64(n))
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	fillPrintable(w.rng, dst[start:])
	return dst
}

// fillPrintable fills b with random bytes in ' '..'_', like YCSB's
// RandomByteIterator: cheap to generate and safe to print.
func fillPrintable(rng *rand.Rand, b []byte) {
	for len(b) > 0 {
		x := rng.Uint64()
		for j := 0; j < 8 && len(b) > 0; j++ {
			b[0] = ' ' + byte(x&63)
			x >>= 8
			b = b[1:]
		}
	}
}

// loadOne inserts the next unclaimed record; it returns false once every
// record number has been claimed.
func (w *worker) loadOne(ctx context.Context) bool {
	n := w.b.loadSeq.Add(1) - 1
	if n >= w.b.cfg.RecordCount {
		return false
	}
	w.key = appendKey(w.key[:0], n)
	w.val = w.appendRecord(w.val[:0])
	start := time.Now()
	err := w.b.store.Put(ctx, w.key, w.val)
	w.finish(ctx, opInsert, start, true, err)
	return true
}

// runOne performs one run-phase operation.
func (w *worker) runOne(ctx context.Context) bool {
	st := w.b.store
	switch k := w.ops.next(); k {
	case opRead:
		w.key = appendKey(w.key[:0], w.keys.next())
		start := time.Now()
		_, found, err := st.Get(ctx, w.key)
		w.finish(ctx, k, start, found, err)
	case opUpdate:
		w.key = appendKey(w.key[:0], w.keys.next())
		w.val = w.appendRecord(w.val[:0])
		start := time.Now()
		err := st.Put(ctx, w.key, w.val)
		w.finish(ctx, k, start, true, err)
	case opInsert:
		n := w.b.insertSeq.next()
		w.key = appendKey(w.key[:0], n)
		w.val = w.appendRecord(w.val[:0])
		start := time.Now()
		err := st.Put(ctx, w.key, w.val)
		// Acknowledge even on failure, as YCSB does: a failed insert
		// must not stall the limit forever. Readers may then find the key
		// missing, which shows up as not found.
		w.b.insertSeq.acknowledge(n)
		w.finish(ctx, k, start, true, err)
	case opScan:
		w.key = appendKey(w.key[:0], w.keys.next())
		limit := int(w.scanLen.next())
		start := time.Now()
		_, err := st.Scan(ctx, w.key, limit)
		w.finish(ctx, k, start, true, err)
	case opReadModifyWrite:
		w.key = appendKey(w.key[:0], w.keys.next())
		start := time.Now()
		found, err := w.readModifyWrite(ctx)
		w.finish(ctx, k, start, found, err)
	}
	return true
}

// readModifyWrite is YCSB F's operation, built on Get and Put: read the
// record under w.key, replace one random field and write it back. A
// missing or undecodable record is replaced by a fresh one.
func (w *worker) readModifyWrite(ctx context.Context) (found bool, err error) {
	old, found, err := w.b.store.Get(ctx, w.key)
	if err != nil {
		return false, err
	}
	var decodeErr error
	if found {
		w.fields, decodeErr = decodeRecord(w.fields[:0], old)
	}
	if !found || decodeErr != nil || len(w.fields) == 0 {
		w.val = w.appendRecord(w.val[:0])
	} else {
		target := w.rng.IntN(len(w.fields))
		w.val = w.val[:0]
		for i, f := range w.fields {
			if i == target {
				w.val = w.appendRandomField(w.val)
			} else {
				w.val = appendField(w.val, f)
			}
		}
	}
	return found, w.b.store.Put(ctx, w.key, w.val)
}

// load runs the load phase.
func (b *benchmark) load(ctx context.Context, p *progress) *PhaseResult {
	workers := make([]*worker, b.cfg.LoadThreads)
	for i := range workers {
		workers[i] = b.newWorker(i, loadStream)
		workers[i].quota = -1 // bounded by the shared record sequence
	}
	return b.phase(ctx, "load", workers, b.cfg.RecordCount, 0, p, (*worker).loadOne)
}

// run runs the run phase, splitting OperationCount evenly as YCSB does.
func (b *benchmark) run(ctx context.Context, p *progress) *PhaseResult {
	cfg := b.cfg
	workers := make([]*worker, cfg.Threads)
	for i := range workers {
		w := b.newWorker(i, runStream)
		w.ops = newOpChooser(w.rng, b.wl.mix)
		w.keys = b.keyChooser(w.rng)
		w.scanLen = newUniform(w.rng, 1, int64(cfg.MaxScanLength))
		w.quota = -1
		if cfg.OperationCount > 0 {
			w.quota = cfg.OperationCount / int64(cfg.Threads)
			if int64(i) < cfg.OperationCount%int64(cfg.Threads) {
				w.quota++
			}
		}
		workers[i] = w
	}
	return b.phase(ctx, "run", workers, cfg.OperationCount, cfg.Duration, p, (*worker).runOne)
}

// Values of PhaseResult.Stopped.
const (
	StoppedCompleted = "completed" // every operation ran
	StoppedDuration  = "duration"  // Config.Duration elapsed
	StoppedCanceled  = "canceled"  // the context was cancelled
)

// phase runs step on every worker until each reaches its quota, step
// returns false, limit elapses (if non-zero) or ctx is cancelled, then
// merges the workers' statistics.
func (b *benchmark) phase(ctx context.Context, name string, workers []*worker, total int64,
	limit time.Duration, p *progress, step func(*worker, context.Context) bool) *PhaseResult {
	// Workers poll one flag rather than ctx.Err() so that the check costs
	// an atomic load, not a lock shared by every goroutine.
	var stop atomic.Bool
	phaseDone := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		var timeout <-chan time.Time
		if limit > 0 {
			t := time.NewTimer(limit)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ctx.Done():
		case <-timeout:
		case <-phaseDone:
			return
		}
		stop.Store(true)
	}()

	before, probeErr := b.sample(ctx)
	start := time.Now()
	tl := &timeline{begin: start}
	for _, w := range workers {
		w.tl = tl
	}
	p.start(start, total, limit, workers)
	var wg sync.WaitGroup
	var interrupted atomic.Bool // some worker stopped before its quota
	for _, w := range workers {
		wg.Go(func() {
			for w.quota != 0 {
				// A cancelled operation stops its worker at once: the
				// watcher may not have set stop yet.
				if stop.Load() || w.canceled {
					interrupted.Store(true)
					return
				}
				if !step(w, ctx) {
					return
				}
				if w.quota > 0 {
					w.quota--
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, w := range workers {
		tl.flush(w)
	}
	close(phaseDone)
	<-watcherDone
	p.stop(time.Now())

	stopped := StoppedCompleted
	if interrupted.Load() {
		stopped = StoppedDuration
		if ctx.Err() != nil {
			stopped = StoppedCanceled
		}
	}
	pr := summarize(name, workers, elapsed, stopped)
	pr.Timeline = tl.points(elapsed)
	if b.probe != nil {
		after, err := b.sample(ctx)
		pr.Cost = costOf(before, after, pr.Operations)
		if err = cmp.Or(probeErr, err); err != nil {
			pr.Cost = Cost{Error: err.Error()}
		}
	}
	return pr
}

// sample runs the probe, if any. It outlives a cancelled ctx, so that an
// interrupted phase still gets its cost.
func (b *benchmark) sample(ctx context.Context) ([]Counters, error) {
	if b.probe == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return b.probe(ctx)
}
