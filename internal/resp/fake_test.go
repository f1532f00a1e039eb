package resp

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/internal/testutil/manualclock"
)

// fakeKV is an in-memory KV: a map behind a mutex, sorted scans, CAS, a
// version per key, serial transactions. It rejects empty keys like TideKV
// does, and Writes whose keys straddle splitAt (if set), like a
// multi-range Write. Values expire by clock.
type fakeKV struct {
	mu  sync.Mutex
	m   map[string][]byte
	exp map[string]time.Time // expiry of the keys that have one
	// vers: each key's version, a count of the store's writes, kept when
	// the key is deleted (as a tombstone's timestamp is).
	vers    map[string]int64
	written int64
	clock   *manualclock.Clock
	splitAt []byte
	// sorted: the keys of m in order, for scans, and keys deleted since
	// (gone: how many); nil: made again by the next scan, after a key was
	// added or when more than half are gone.
	sorted  []string
	gone    int
	scans   int
	scanned int // keys Scan returned
	guarded int // GuardedWrite calls
	reads   int // Get and BatchGet calls
	// txReads: Get and BatchGet calls of transactions; txBatchMost: the
	// most keys one of their BatchGets asked; txScans: their Scan calls.
	txReads, txBatchMost, txScans int
	// eachOps: the ops of every WriteEach call, for tests of grouping.
	eachOps [][]Op
	// conflicts: how many attempts of the next Txn fail as a conflict
	// would, after fn ran, before the one that commits.
	conflicts int
	// txFail: the error of every transaction's writes past the first
	// txFailAfter of each attempt.
	txFail      error
	txFailAfter int
	// commits: transactions committed.
	commits int
	// tombs, when not nil, holds the keys deleted and not written since:
	// the deletions an MVCC store keeps until GC, which its scans step
	// over; stepped counts those the scans passed (tombSorted: tombs in
	// order, nil after a change).
	tombs      map[string]bool
	tombSorted []string
	stepped    int
	// olderLayouts: SetPositions answers false, as a cluster with a node
	// on an older binary does. Not under mu, which a transaction holds.
	olderLayouts atomic.Bool
}

func (f *fakeKV) SetPositions() bool { return !f.olderLayouts.Load() }

// keepTombs makes f count the deletions its scans step over (stepped).
func (f *fakeKV) keepTombs() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tombs = map[string]bool{}
}

// steps runs fn and returns the deletions its scans stepped over.
func (f *fakeKV) steps(fn func()) int {
	f.mu.Lock()
	f.stepped = 0
	f.mu.Unlock()
	fn()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stepped
}

// stepOver counts the deletions in [start, stop] (stop nil: to end) as
// stepped.
func (f *fakeKV) stepOver(start, stop, end []byte) {
	if f.tombs == nil {
		return
	}
	if f.tombSorted == nil {
		f.tombSorted = slices.Sorted(maps.Keys(f.tombs))
	}
	for i := sort.SearchStrings(f.tombSorted, string(start)); i < len(f.tombSorted); i++ {
		k := f.tombSorted[i]
		if (stop != nil && k > string(stop)) || (len(end) > 0 && k >= string(end)) {
			return
		}
		f.stepped++
	}
}

func newFakeKV() *fakeKV {
	return &fakeKV{m: map[string][]byte{}, exp: map[string]time.Time{}, vers: map[string]int64{}, clock: manualclock.New(time.Unix(1_700_000_000, 0))}
}

// live returns k's value if it has one that has not expired; an expired
// one is dropped.
func (f *fakeKV) live(k []byte) ([]byte, bool) {
	if at, ok := f.exp[string(k)]; ok && !f.clock.Now().Before(at) {
		f.del(k)
	}
	v, ok := f.m[string(k)]
	return v, ok
}

func (f *fakeKV) del(k []byte) {
	if _, ok := f.m[string(k)]; ok {
		if f.gone++; f.gone > len(f.m)/2 {
			f.sorted = nil
		}
	}
	delete(f.m, string(k))
	delete(f.exp, string(k))
	f.bump(k)
	if f.tombs != nil && !f.tombs[string(k)] {
		f.tombs[string(k)], f.tombSorted = true, nil
	}
}

func (f *fakeKV) bump(k []byte) {
	f.written++
	f.vers[string(k)] = f.written
}

func (f *fakeKV) version(k []byte) Version { return Version{WallTime: f.vers[string(k)]} }

// set writes k's value with expiry e.
func (f *fakeKV) set(k, v []byte, e Expiry) {
	_, had := f.live(k)
	if _, ok := f.m[string(k)]; !ok {
		f.sorted = nil
	}
	f.m[string(k)] = cp(v)
	f.bump(k)
	if f.tombs[string(k)] {
		delete(f.tombs, string(k))
		f.tombSorted = nil
	}
	switch {
	case e.Keep && had:
	case e.TTL > 0:
		f.exp[string(k)] = f.clock.Now().Add(e.TTL)
	case !e.At.IsZero():
		f.exp[string(k)] = e.At
	default:
		delete(f.exp, string(k))
	}
}

// ttl is k's remaining time to live, in whole milliseconds rounded up as
// the store answers (0: none).
func (f *fakeKV) ttl(k []byte) time.Duration {
	at, ok := f.exp[string(k)]
	if !ok {
		return 0
	}
	return (at.Sub(f.clock.Now()) + time.Millisecond - 1).Truncate(time.Millisecond)
}

func cp(b []byte) []byte { return append([]byte{}, b...) }

func checkKey(k []byte) error {
	if len(k) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	}
	return nil
}

func (f *fakeKV) Get(_ context.Context, key []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if err := checkKey(key); err != nil {
		return nil, err
	}
	v, ok := f.live(key)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return cp(v), nil
}

func (f *fakeKV) Put(_ context.Context, key, value []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkKey(key); err != nil {
		return err
	}
	f.set(key, value, Expiry{})
	return nil
}

func (f *fakeKV) Delete(_ context.Context, key []byte) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkKey(key); err != nil {
		return false, err
	}
	_, ok := f.live(key)
	f.del(key)
	return ok, nil
}

func (f *fakeKV) BatchGet(_ context.Context, keys [][]byte) ([]Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	out := make([]Result, len(keys))
	for i, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err
		}
		v, ok := f.live(k)
		out[i] = Result{Value: cp(v), Found: ok, TTL: f.ttl(k), Version: f.version(k)}
	}
	return out, nil
}

func (f *fakeKV) Write(_ context.Context, ops []Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkOps(ops); err != nil {
		return err
	}
	f.apply(ops)
	return nil
}

// checkOps rejects empty keys, and keys on both sides of splitAt.
func (f *fakeKV) checkOps(ops []Op) error {
	var lo, hi int
	for _, op := range ops {
		if err := checkKey(op.Key); err != nil {
			return err
		}
		if f.splitAt != nil && bytes.Compare(op.Key, f.splitAt) < 0 {
			lo++
		} else {
			hi++
		}
	}
	if lo > 0 && hi > 0 && f.splitAt != nil {
		return fmt.Errorf("%w: keys span more than one range", ErrInvalidArgument)
	}
	return nil
}

func (f *fakeKV) apply(ops []Op) {
	for _, op := range ops {
		cur, ok := f.live(op.Key)
		switch {
		case op.Delete:
			f.del(op.Key)
		case op.SetTTL && ok:
			f.set(op.Key, cur, op.Expiry)
		case !op.SetTTL:
			f.set(op.Key, op.Value, op.Expiry)
		}
	}
}

// WriteEach applies ops in order, each on its own, and fails an op with an
// empty key alone.
func (f *fakeKV) WriteEach(_ context.Context, ops []Op) []OpResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eachOps = append(f.eachOps, ops)
	out := make([]OpResult, len(ops))
	for i, op := range ops {
		if out[i].Err = checkKey(op.Key); out[i].Err != nil {
			continue
		}
		_, out[i].Existed = f.live(op.Key)
		f.apply([]Op{op})
	}
	return out
}

func (f *fakeKV) GuardedWrite(_ context.Context, ops []Op, g Guard) (GuardResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.guarded++
	// The guard's key and its clear span's start, if it has one, must
	// lie in the ops' range, as the store's kvapi checks.
	keys := append(ops[:len(ops):len(ops)], Op{Key: g.Key})
	if len(g.ClearStart) > 0 {
		keys = append(keys, Op{Key: g.ClearStart})
	}
	if err := f.checkOps(keys); err != nil {
		return GuardResult{}, err
	}
	cur, ok := f.live(g.Key)
	if ok && !bytes.Equal(cur, g.Value) {
		return GuardResult{Failed: true}, nil
	}
	// A guard without a clear span (DEL's clearing: the key still absent)
	// clears nothing; looking over every key for it made each of DEL's
	// batches cost the whole store.
	if !ok && len(g.ClearEnd) > 0 {
		for k := range f.m {
			if k >= string(g.ClearStart) && k < string(g.ClearEnd) {
				f.del([]byte(k))
			}
		}
	}
	var res GuardResult
	for _, op := range ops {
		_, found := f.live(op.Key)
		res.Existed = append(res.Existed, found)
		f.apply([]Op{op})
	}
	return res, nil
}

func (f *fakeKV) CompareAndSet(_ context.Context, key []byte, expected, newValue *[]byte, e Expiry) (bool, []byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkKey(key); err != nil {
		return false, nil, false, err
	}
	cur, ok := f.live(key)
	match := (expected == nil && !ok) || (expected != nil && ok && bytes.Equal(*expected, cur))
	if !match {
		return false, cp(cur), ok, nil
	}
	if newValue == nil {
		f.del(key)
	} else {
		f.set(key, *newValue, e)
	}
	return true, cp(cur), ok, nil
}

func (f *fakeKV) Scan(_ context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scanLocked(start, end, limit), nil
}

func (f *fakeKV) scanLocked(start, end []byte, limit int) []KeyValue {
	f.scans++
	if f.sorted == nil {
		f.sorted, f.gone = slices.Sorted(maps.Keys(f.m)), 0
	}
	keys := f.sorted // live may drop an expired key (and f.sorted) on the way
	var out []KeyValue
	for i := sort.SearchStrings(keys, string(start)); i < len(keys) && (len(end) == 0 || keys[i] < string(end)); i++ {
		if limit > 0 && len(out) == limit {
			break
		}
		if v, ok := f.live([]byte(keys[i])); ok {
			out = append(out, KeyValue{Key: []byte(keys[i]), Value: cp(v)})
		}
	}
	var stop []byte // the last key read, when the limit stopped the scan
	if limit > 0 && len(out) == limit {
		stop = out[len(out)-1].Key
	}
	f.stepOver(start, stop, end)
	f.scanned += len(out)
	return out
}

// Txn is client.Txn's twin: transactions run one at a time with the store
// locked (so they are serializable, and nothing else writes meanwhile),
// each attempt's writes kept aside and applied together when fn returns
// nil. The first f.conflicts attempts are thrown away after fn, as a
// conflict's would be, and fn runs again.
func (f *fakeKV) Txn(_ context.Context, fn func(TxnKV) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ; ; f.conflicts-- {
		tx := &fakeTx{f: f, writes: map[string]*[]byte{}, exps: map[string]Expiry{}}
		if err := fn(tx); err != nil {
			return err
		}
		if f.conflicts > 0 {
			continue
		}
		f.commits++
		for k, v := range tx.writes {
			if v == nil {
				f.del([]byte(k))
			} else {
				f.set([]byte(k), *v, tx.exps[k])
			}
		}
		return nil
	}
}

// fakeTx is one attempt of fakeKV.Txn; writes holds its puts (nil:
// deletes), which its reads see (with no version yet).
type fakeTx struct {
	f      *fakeKV
	writes map[string]*[]byte
	exps   map[string]Expiry // of the puts in writes
	// n counts its writes, for fakeKV.txFailAfter.
	n int
}

// failing is the error injected into the attempt's next write, if any.
func (t *fakeTx) failing() error {
	if t.f.txFail == nil {
		return nil
	}
	if t.n++; t.n <= t.f.txFailAfter {
		return nil
	}
	return t.f.txFail
}

func (t *fakeTx) Get(_ context.Context, key []byte) (Result, error) {
	t.f.txReads++
	return t.get(key)
}

// get is a read of the attempt, counted by its caller.
func (t *fakeTx) get(key []byte) (Result, error) {
	if err := checkKey(key); err != nil {
		return Result{}, err
	}
	if v, ok := t.writes[string(key)]; ok {
		if v == nil {
			return Result{}, nil
		}
		return Result{Value: cp(*v), Found: true, Expiry: t.exps[string(key)]}, nil
	}
	cur, found := t.f.live(key)
	return Result{Value: cp(cur), Found: found, Version: t.f.version(key), Expiry: Expiry{At: t.f.exp[string(key)]}}, nil
}

func (t *fakeTx) BatchGet(_ context.Context, keys [][]byte) ([]Result, error) {
	t.f.txReads++
	t.f.txBatchMost = max(t.f.txBatchMost, len(keys))
	out := make([]Result, len(keys))
	for i, k := range keys {
		var err error
		if out[i], err = t.get(k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *fakeTx) Put(_ context.Context, key, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := t.failing(); err != nil {
		return err
	}
	v := cp(value)
	t.writes[string(key)] = &v
	delete(t.exps, string(key))
	return nil
}

func (t *fakeTx) PutExpiring(ctx context.Context, key, value []byte, e Expiry) error {
	if e.Keep {
		return fmt.Errorf("%w: a transaction cannot keep a TTL", ErrInvalidArgument)
	}
	if err := t.Put(ctx, key, value); err != nil {
		return err
	}
	t.exps[string(key)] = e
	return nil
}

func (t *fakeTx) Delete(_ context.Context, key []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := t.failing(); err != nil {
		return err
	}
	t.writes[string(key)] = nil
	return nil
}

// Scan reads the store (locked by Txn) with the attempt's writes over it.
func (t *fakeTx) Scan(_ context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	t.f.txScans++
	// Each delete in the span hides one stored key: ask for that many
	// more, not for the whole span (a command paging through a big
	// collection would copy it whole each page).
	ask := limit
	for k, v := range t.writes {
		if v == nil && limit > 0 && inSpan([]byte(k), start, end) {
			ask++
		}
	}
	return overlay(t.f.scanLocked(start, end, ask), t.writes, start, end, limit), nil
}

// errKV fails every call with err.
type errKV struct {
	*fakeKV
	err error
}

func (e errKV) Get(context.Context, []byte) ([]byte, error)  { return nil, e.err }
func (e errKV) Put(context.Context, []byte, []byte) error    { return e.err }
func (e errKV) Txn(context.Context, func(TxnKV) error) error { return e.err }
func (e errKV) WriteEach(_ context.Context, ops []Op) []OpResult {
	out := make([]OpResult, len(ops))
	for i := range out {
		out[i].Err = e.err
	}
	return out
}
