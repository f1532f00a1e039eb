package txn

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The transaction coordinator (docs/transactions.md step 5): the node a
// client sends a transaction's operations to keeps the transaction while
// it is open. Reads go to the leaseholders at the read timestamp; writes
// are kept here until the commit (reads of them answered from here), so
// that a transaction whose keys all lie in one range commits in one Raft
// command (commit.go). Otherwise the commit writes them as intents,
// creating the record (PENDING) at the first key (the anchor), which the
// coordinator heartbeats until the end; the record becomes COMMITTED at
// the highest timestamp an intent was written at (after the reads are
// refreshed up to it when it is above the read timestamp), the client is
// answered, and the intents are resolved in the background. Anything that
// stops a transaction (a limit, its deadline, a rollback, a push that
// aborted it) aborts its record and resolves what it wrote before the
// answer.

// Coordinator holds the transactions open on this node.
type Coordinator struct {
	deps Deps
	mu   sync.Mutex
	txns map[string]*openTxn
}

// Deps is what a Coordinator is made of: the node's parts it uses and its
// knobs.
type Deps struct {
	Store  Store
	Send   Sender
	Node   Node
	Config Config
	// MaxBatchKeys is the node's limit on a request's keys: it bounds a
	// one-shot transaction's keys, and the ops or keys of each request a
	// commit sends a range (a transaction writing more commits in two
	// phases, its intents written and resolved in pieces of this size;
	// Config.MaxKeys bounds the whole).
	MaxBatchKeys int
	// MaxScanLimit is the most keys a range serves in one scan (the
	// node's limit): a transaction's scan asks for no more per pass.
	MaxScanLimit int
	// ClientClock and SkipRefresh are testing breaks
	// (raftstore.TestingBreaks): read at the client's timestamp, commit
	// without refreshing.
	ClientClock, SkipRefresh bool
	Metrics                  Metrics
	// Stopped is closed when the node stops: heartbeats end.
	Stopped <-chan struct{}
	// Ticker makes a heartbeat loop's ticker (nil: a time.Ticker's ticks
	// and Stop); tests tick it by hand.
	Ticker func(every time.Duration) (ticks <-chan time.Time, stop func())
}

// Metrics are the coordinator's counters, registered by the node.
type Metrics struct {
	// Commits by path ("one_phase", "two_phase").
	Commits           *prometheus.CounterVec
	Refreshes         prometheus.Counter
	UncertainRestarts prometheus.Counter
	// RecordsLeft counts records the coordinator chose not to remove or
	// failed to, by why ("creation_unsure", "forget_failed").
	RecordsLeft *prometheus.CounterVec
}

// openTxn is one open transaction. mu orders its operations; fail is set
// from outside them (a heartbeat that found the record aborted).
type openTxn struct {
	mu  sync.Mutex
	key *tidekvpb.TxnKey // anchor empty until the first write
	// clientID is the ID the client named it by (key's is owner.txnID's).
	clientID string
	// owner proves a caller began the transaction: the owner token and
	// user it began with (ownerOf).
	owner owner
	// readTS is from this node's clock when the transaction began, raised
	// above versions found in its uncertainty window, which ends at limit
	// (docs/transactions.md, "Uncertainty").
	readTS hlc.Timestamp
	limit  hlc.Timestamp
	reads  [][]byte
	// scans are the spans it scanned, as far as it read them.
	scans []*tidekvpb.KeySpan
	// pending are the writes kept for the commit, one per key (the last),
	// at pendingAt[key].
	pending   []*tidekvpb.WriteOp
	pendingAt map[string]int
	// written are the keys that may hold its intents.
	written map[string]bool
	bytes   int64
	done    chan struct{}
	// beating is closed when the heartbeat loop has stopped (nil: no
	// two-phase commit began): a heartbeat landing after the record is
	// removed would make it again.
	beating chan struct{}
	// creationUnsure: the heartbeat that creates the record got no
	// answer, so it may still apply, after anything the coordinator does.
	creationUnsure atomic.Bool
	timer          *time.Timer
	fail           atomic.Pointer[error]
}

// New returns a coordinator with no open transaction.
func New(d Deps) *Coordinator {
	return &Coordinator{deps: d, txns: map[string]*openTxn{}}
}

// Open is how many transactions are open here.
func (c *Coordinator) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.txns)
}

// open finds the transaction meta names, starting it on its first
// operation (begin is client-side) at a read timestamp from this node's
// clock: the one the client proposes comes from the client's clock, which
// the cluster does not trust (docs/transactions.md, "Timestamps the
// cluster owns"). A transaction open here for another owner is refused.
func (c *Coordinator) open(ctx context.Context, meta *tidekvpb.TxnMeta) (*openTxn, error) {
	id := meta.GetId()
	if len(id) == 0 || len(id) > 64 || meta.GetReadTimestamp().GetWallNanos() <= 0 {
		return nil, &invalidError{"a transaction needs an ID of 1 to 64 bytes and a read timestamp"}
	}
	o, err := c.ownerOf(ctx, meta)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.txns[string(id)]; t != nil {
		return t, t.owner.check(o, id)
	}
	clock := c.deps.Store.HLC()
	ts := clock.Now()
	limit := ts
	limit.WallTime += int64(clock.MaxOffset())
	if c.deps.ClientClock {
		ts = meta.GetReadTimestamp().HLC()
		limit = ts
	}
	t := &openTxn{key: &tidekvpb.TxnKey{Id: o.txnID(id)}, clientID: string(id), owner: o, readTS: ts, limit: limit,
		pendingAt: map[string]int{}, written: map[string]bool{}, done: make(chan struct{})}
	t.timer = time.AfterFunc(c.deps.Config.MaxDuration, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		c.abort(t, fmt.Sprintf("it ran past its deadline of %v", c.deps.Config.MaxDuration))
	})
	c.txns[string(id)] = t
	return t, nil
}

// read runs one read of t (at t.readTS, with t.limit), and again each
// time it finds a committed version in t's uncertainty window, after
// raising t to that version's timestamp: the reads and scans t made are
// refreshed up to it first, so that all of them stay one snapshot, and a
// refresh that fails restarts the transaction. The clock moves past it,
// so that a restart on this node begins above it. Each raise moves t up
// and none passes t.limit, so the loop ends.
func (c *Coordinator) read(ctx context.Context, t *openTxn, once func() error) error {
	for {
		err := once()
		var ue *UncertainReadError
		if !errors.As(err, &ue) || !t.readTS.Less(ue.Timestamp) || t.limit.Less(ue.Timestamp) {
			return err
		}
		_, _ = c.deps.Store.HLC().Update(ue.Timestamp) // one too far ahead stays out; the refresh still moves t
		c.deps.Metrics.UncertainRestarts.Inc()
		if err := t.refresh(ctx, c.deps.Send, ue.Timestamp); err != nil {
			return err
		}
		t.readTS = ue.Timestamp
	}
}

// refresh checks that nothing t read or scanned at its read timestamp
// changed up to to (TXN_RETRY if something did), and records those reads
// at to, so that nothing changes them below it later.
func (t *openTxn) refresh(ctx context.Context, send Sender, to hlc.Timestamp) error {
	if len(t.reads) > 0 {
		if err := send.RefreshReads(ctx, t.key.GetId(), t.reads, t.readTS, to); err != nil {
			return err
		}
	}
	return send.RefreshSpans(ctx, t.key.GetId(), t.scans, t.readTS, to)
}

// failed is why t cannot go on, if anything stopped it.
func (t *openTxn) failed() error {
	if e := t.fail.Load(); e != nil {
		return *e
	}
	return nil
}

func (t *openTxn) stop(err error) { t.fail.CompareAndSwap(nil, &err) }

// lockOpen returns meta's open transaction locked (the caller unlocks it),
// unless it has failed or the cluster does not run transactions yet
// (checkTxnKey).
func (c *Coordinator) lockOpen(ctx context.Context, meta *tidekvpb.TxnMeta) (*openTxn, error) {
	if err := c.deps.Node.NeedTxnVersion(); err != nil {
		return nil, err
	}
	t, err := c.open(ctx, meta)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if err := t.failed(); err != nil {
		t.mu.Unlock()
		return nil, err
	}
	return t, nil
}

// Get reads key at the transaction's read timestamp, its own writes
// included.
func (c *Coordinator) Get(ctx context.Context, meta *tidekvpb.TxnMeta, key []byte) (*tidekvpb.TxnGetResponse, error) {
	ctx, t, err := c.lockReading(ctx, meta, key)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	if r, ok := t.pendingRead(key); ok {
		r.ReadTimestamp = tidekvpb.FromHLC(t.readTS)
		return r, nil
	}
	var v Value
	err = c.read(ctx, t, func() (err error) {
		v, err = c.deps.Send.Get(ctx, key, t.readAt())
		return err
	})
	if err != nil {
		return nil, c.failOp(t, err)
	}
	t.reads = append(t.reads, key)
	out := t.readResponse(v)
	out.ReadTimestamp = tidekvpb.FromHLC(t.readTS)
	return out, nil
}

// batchGetInFlight bounds the reads one BatchGet has in flight.
const batchGetInFlight = 16

// BatchGet reads keys as Get reads each, in one operation of t: the keys
// t has not written are read from their ranges at once, at t's read
// timestamp; then each read that found a version in t's uncertainty window
// is made again as Get makes it (after the others joined t's reads, so
// that the refresh that raises the read timestamp covers them).
func (c *Coordinator) BatchGet(ctx context.Context, meta *tidekvpb.TxnMeta, keys [][]byte) (*tidekvpb.TxnBatchGetResponse, error) {
	// The node's limit on a request's keys, as a KV BatchGet's and a
	// transaction's write's: t stays locked for the whole read, and the
	// answer is held in memory at once.
	if len(keys) > c.deps.MaxBatchKeys {
		return nil, &invalidError{fmt.Sprintf("a transaction's batch get of %d keys exceeds the maximum batch size of %d", len(keys), c.deps.MaxBatchKeys)}
	}
	ctx, t, err := c.lockReading(ctx, meta, keys...)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	out := make([]*tidekvpb.TxnGetResponse, len(keys))
	errs := make([]error, len(keys))
	at := t.readAt()
	var wg sync.WaitGroup
	slots := make(chan struct{}, batchGetInFlight)
	for i, k := range keys {
		if r, ok := t.pendingRead(k); ok {
			out[i] = r
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			var v Value
			if v, errs[i] = c.deps.Send.Get(ctx, k, at); errs[i] == nil {
				out[i] = t.readResponse(v)
			}
		})
	}
	wg.Wait()
	for i, k := range keys {
		if out[i] != nil && errs[i] == nil && !t.isPending(k) {
			t.reads = append(t.reads, k)
		}
	}
	for i, k := range keys {
		var ue *UncertainReadError
		switch {
		case errs[i] == nil:
			continue
		case !errors.As(errs[i], &ue):
			return nil, c.failOp(t, errs[i])
		}
		// The read found stands for the first, unless an earlier key's
		// raised the read timestamp since.
		var v Value
		first := errs[i]
		if err := c.read(ctx, t, func() (err error) {
			if first != nil && t.readTS == at.Timestamp {
				err, first = first, nil
				return err
			}
			v, err = c.deps.Send.Get(ctx, k, t.readAt())
			return err
		}); err != nil {
			return nil, c.failOp(t, err)
		}
		t.reads = append(t.reads, k)
		out[i] = t.readResponse(v)
	}
	return &tidekvpb.TxnBatchGetResponse{Results: out, ReadTimestamp: tidekvpb.FromHLC(t.readTS)}, nil
}

// lockReading checks keys and returns meta's open transaction locked
// (lockOpen; the caller unlocks it), and ctx naming its key space for the
// reads of keys.
func (c *Coordinator) lockReading(ctx context.Context, meta *tidekvpb.TxnMeta, keys ...[]byte) (context.Context, *openTxn, error) {
	for _, k := range keys {
		if err := c.deps.Node.CheckKey(k); err != nil {
			return nil, nil, err
		}
	}
	ctx, err := c.inKeySpace(ctx, meta, keys...)
	if err != nil {
		return nil, nil, err
	}
	t, err := c.lockOpen(ctx, meta)
	return ctx, t, err
}

// pendingRead answers a read of a key t has written from the write kept
// for the commit; ok false: t has not written it.
func (t *openTxn) pendingRead(key []byte) (*tidekvpb.TxnGetResponse, bool) {
	i, ok := t.pendingAt[string(key)]
	if !ok {
		return nil, false
	}
	if op := t.pending[i]; op.GetKind() == tidekvpb.WriteOp_PUT {
		return &tidekvpb.TxnGetResponse{Found: true, Value: op.GetValue(), TtlMs: op.GetTtlMs(), ExpireAtMs: op.GetExpireAtMs()}, true
	}
	return &tidekvpb.TxnGetResponse{}, true
}

func (t *openTxn) isPending(key []byte) bool {
	_, ok := t.pendingAt[string(key)]
	return ok
}

// readResponse answers a read of v, made at t's read timestamp.
func (t *openTxn) readResponse(v Value) *tidekvpb.TxnGetResponse {
	out := &tidekvpb.TxnGetResponse{Found: v.Found, Value: v.Value, VersionTimestamp: tidekvpb.OptionalHLC(v.Version)}
	if v.TTL > 0 {
		// A read at a timestamp judges expiry at that timestamp's wall
		// time, so its TTL counts from there.
		out.ExpireAtMs = raftstore.CeilMillis(t.readTS.WallTime + v.TTL.Nanoseconds())
	}
	return out
}

// inKeySpace checks keys against the transaction's key space, as the KV
// service checks a request's, and names it in ctx for the reads made with
// it.
func (c *Coordinator) inKeySpace(ctx context.Context, meta *tidekvpb.TxnMeta, keys ...[]byte) (context.Context, error) {
	if err := c.deps.Node.CheckKeySpace(ctx, meta.GetKeyspace(), keys...); err != nil {
		return nil, err
	}
	return keyspace.WithName(ctx, meta.GetKeyspace()), nil
}

// failOp aborts t after an operation failed in a way that stops it (a
// retryable transaction error), and passes the error on.
func (c *Coordinator) failOp(t *openTxn, err error) error {
	if errors.Is(err, ErrRetry) {
		c.abort(t, err.Error())
	}
	return err
}

// Write keeps ops for the commit; a later write of a key replaces an
// earlier one.
func (c *Coordinator) Write(ctx context.Context, meta *tidekvpb.TxnMeta, ops []*tidekvpb.WriteOp) (*tidekvpb.TxnWriteResponse, error) {
	if err := c.deps.Node.CheckTxnOps(ops); err != nil {
		return nil, err
	}
	keys := make([][]byte, len(ops))
	for i, op := range ops {
		keys[i] = op.GetKey()
	}
	if _, err := c.inKeySpace(ctx, meta, keys...); err != nil {
		return nil, err
	}
	t, err := c.lockOpen(ctx, meta)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	if err := c.checkLimits(t, ops); err != nil {
		return nil, err
	}
	for _, op := range ops {
		t.bytes += int64(len(op.GetKey()) + len(op.GetValue()))
		if i, ok := t.pendingAt[string(op.GetKey())]; ok {
			t.pending[i] = op
			continue
		}
		t.pendingAt[string(op.GetKey())] = len(t.pending)
		t.pending = append(t.pending, op)
	}
	return &tidekvpb.TxnWriteResponse{}, nil
}

func maxHLC(a, b hlc.Timestamp) hlc.Timestamp {
	if a.Less(b) {
		return b
	}
	return a
}

// checkLimits refuses a write past the transaction's key or byte limit,
// aborting the transaction first, so that nothing of it stays.
func (c *Coordinator) checkLimits(t *openTxn, ops []*tidekvpb.WriteOp) error {
	lim := c.deps.Config
	keys, bytes := len(t.pending), t.bytes
	seen := map[string]bool{}
	for _, op := range ops {
		if _, ok := t.pendingAt[string(op.GetKey())]; !ok && !seen[string(op.GetKey())] {
			keys++
			seen[string(op.GetKey())] = true
		}
		bytes += int64(len(op.GetKey()) + len(op.GetValue()))
	}
	if keys <= lim.MaxKeys && bytes <= lim.MaxBytes {
		return nil
	}
	err := &invalidError{fmt.Sprintf("transaction %x would write %d keys and %d bytes, over its limits of %d keys and %d bytes; it was rolled back",
		t.key.GetId(), keys, bytes, lim.MaxKeys, lim.MaxBytes)}
	c.abort(t, "it went over its limits")
	return err
}

// heartbeat keeps t's record alive, a heartbeat on each of ticks, until t
// ends or the node stops. A record found aborted (pushed after a missed
// heartbeat) stops t and the loop: a final record is left as it is.
// These heartbeats only refresh the record: one that timed out may apply
// after t ended and forgetRecord removed it, and must not make it again.
func (c *Coordinator) heartbeat(t *openTxn, ticks <-chan time.Time) {
	for {
		select {
		case <-t.done:
			return
		case <-c.deps.Stopped:
			return
		case <-ticks:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.deps.Config.HeartbeatInterval)
		rec, err := c.deps.Send.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: t.key, Op: tidekvpb.TxnRecordOp_TXN_HEARTBEAT, Refresh: true})
		cancel()
		if err == nil && rec.GetStatus() == tidekvpb.TxnStatus_TXN_ABORTED {
			t.stop(&retryError{fmt.Sprintf("transaction %x was aborted by another transaction (a heartbeat came later than the expiry of %v)", t.key.GetId(), c.deps.Config.Expiry)})
			return
		}
	}
}

// ticker is a heartbeat loop's ticker (Deps.Ticker).
func (c *Coordinator) ticker() (<-chan time.Time, func()) {
	if c.deps.Ticker != nil {
		return c.deps.Ticker(c.deps.Config.HeartbeatInterval)
	}
	tk := time.NewTicker(c.deps.Config.HeartbeatInterval)
	return tk.C, tk.Stop
}

// forget ends t's life on this node: no more heartbeats or deadline.
func (c *Coordinator) forget(t *openTxn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.txns[t.clientID] == t {
		delete(c.txns, t.clientID)
		close(t.done)
		t.timer.Stop()
	}
}

// abort ends t as ABORTED and removes its intents before returning
// (t.mu held). why says what stopped it, for later operations.
func (c *Coordinator) abort(t *openTxn, why string) {
	t.stop(&retryError{fmt.Sprintf("transaction %x was rolled back: %s", t.key.GetId(), why)})
	c.forget(t)
	if len(t.key.GetAnchor()) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.deps.Config.MaxDuration)
	defer cancel()
	if _, err := c.deps.Send.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: t.key, Op: tidekvpb.TxnRecordOp_TXN_ABORT}); errors.Is(err, ErrCommitted) {
		// A commit applied though its answer was lost: the intents are
		// the transaction's values, resolved from its record by whoever
		// meets them; removing them here would lose committed writes.
		log.Printf("transaction %x: abort: its record is committed already (its intents are resolved by whoever meets them)", t.key.GetId())
		return
	} else if err != nil {
		log.Printf("transaction %x: abort: %v (its intents are cleaned by whoever meets them)", t.key.GetId(), err)
		return
	}
	if err := c.resolve(ctx, t.key, t.writtenKeys(), false, hlc.Timestamp{}); err != nil {
		log.Printf("transaction %x: removing intents: %v (they are cleaned by whoever meets them)", t.key.GetId(), err)
		return
	}
	if t.creationUnsure.Load() {
		// Removed, the record would be made again, PENDING and for good,
		// by the creating heartbeat if it applied now; ABORTED, it stops
		// that heartbeat.
		c.deps.Metrics.RecordsLeft.WithLabelValues("creation_unsure").Inc()
		return
	}
	go c.forgetRecord(t.key, t.beating)
}

// readAt is how t reads: at its read timestamp, up to its limit.
func (t *openTxn) readAt() ReadAt {
	return ReadAt{Timestamp: t.readTS, Limit: t.limit, Txn: t.key.GetId()}
}

func (t *openTxn) writtenKeys() [][]byte {
	ks := make([][]byte, 0, len(t.written))
	for k := range t.written {
		ks = append(ks, []byte(k))
	}
	return ks
}
