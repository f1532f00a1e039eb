package txn

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Heartbeats while a commit writes its intents, on a clock the test moves:
// recordSender keeps the transaction's record as its range would, and the
// coordinator's heartbeat loops tick when the test says.

// recordSender is a fakeSender that keeps one transaction record by the
// rules of a range (raftstore's recordTransition): a heartbeat creates a
// missing record PENDING (a refreshing one fails there instead) or
// refreshes a PENDING one and leaves a final one as it is; a push aborts a
// missing record or one whose last heartbeat is more than the expiry old;
// a commit or an abort of a final record of the other status is refused. Its time moves only by advance, and the
// coordinator's heartbeat loops (Deps.Ticker) tick only by tick. Each
// intent write runs onIntents first.
type recordSender struct {
	*fakeSender
	t    *testing.T
	mu   sync.Mutex
	cond *sync.Cond // broadcast on every change below
	now  time.Duration
	key  *tidekvpb.TxnKey // the record's transaction, from its creation
	rec  *fakeRecord      // nil: none
	// forgotten: the record was removed (a heartbeat after it would make
	// it again).
	forgotten bool
	// heartbeats counts them; late those that found the record final.
	heartbeats, late int
	// loseCreation: the first heartbeat is answered with an error and
	// applied only when the test calls applyLost; holdNext: the next
	// heartbeat after it likewise.
	loseCreation, holdNext bool
	lost                   *tidekvpb.TxnRecordRequest
	tickers                map[*fakeTicker]bool // the live heartbeat loops'
	intentWrites           int
	onIntents              func(n int) // before the n-th intent write (from 1)
}

type fakeRecord struct {
	status tidekvpb.TxnStatus
	beat   time.Duration // the last heartbeat's time
}

type fakeTicker struct {
	c    chan time.Time
	gone chan struct{} // closed when stopped
}

// newRecordCoordinator is a coordinator (of newTestCoordinator) over a
// recordSender, with its heartbeat loops on the sender's tickers; closing
// stopped stops its node.
func newRecordCoordinator(t *testing.T) (rs *recordSender, c *Coordinator, stopped chan struct{}) {
	rs = &recordSender{fakeSender: &fakeSender{writtenAt: hlc.Timestamp{WallTime: now}}, t: t, tickers: map[*fakeTicker]bool{}}
	rs.cond = sync.NewCond(&rs.mu)
	c = newTestCoordinator(t, rs)
	stopped = make(chan struct{})
	c.deps.Stopped, c.deps.Ticker = stopped, rs.ticker
	return rs, c, stopped
}

func (rs *recordSender) ticker(time.Duration) (<-chan time.Time, func()) {
	tk := &fakeTicker{c: make(chan time.Time), gone: make(chan struct{})}
	rs.mu.Lock()
	rs.tickers[tk] = true
	rs.mu.Unlock()
	return tk.c, sync.OnceFunc(func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		delete(rs.tickers, tk)
		close(tk.gone)
		rs.cond.Broadcast()
	})
}

// tick ticks every live heartbeat loop once and returns after the
// heartbeat each tick caused.
func (rs *recordSender) tick() {
	rs.mu.Lock()
	tks := slices.Collect(maps.Keys(rs.tickers))
	rs.mu.Unlock()
	for _, tk := range tks {
		// The record's creation is counted (WriteIntents): every
		// heartbeat from here is a tick's.
		rs.mu.Lock()
		before := rs.heartbeats
		rs.mu.Unlock()
		select {
		case tk.c <- time.Time{}:
			rs.waitFor(func() bool { return rs.heartbeats > before })
		case <-tk.gone:
		}
	}
}

// waitFor waits until cond (read with rs.mu held) holds.
func (rs *recordSender) waitFor(cond func() bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for !cond() {
		rs.cond.Wait()
	}
}

// applyLost applies the heartbeat loseCreation or holdNext held back, and
// returns its answer.
func (rs *recordSender) applyLost(ctx context.Context) error {
	rs.mu.Lock()
	req := rs.lost
	rs.mu.Unlock()
	_, err := rs.TxnRecord(ctx, req)
	return err
}

func (rs *recordSender) advance(d time.Duration) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.now += d
}

func (rs *recordSender) status() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.rec == nil {
		return "none"
	}
	return rs.rec.status.String()
}

// push pushes the transaction as a reader that met one of its intents
// does, and returns whether the push found it ended.
func (rs *recordSender) push(c *Coordinator) bool {
	rs.mu.Lock()
	ie := &raftstore.IntentError{Key: rs.key.GetAnchor(), Txn: &tidekvpb.TxnRef{Id: rs.key.GetId(), Anchor: rs.key.GetAnchor()}}
	rs.mu.Unlock()
	resolved, err := c.Push(context.Background(), ie)
	if err != nil {
		rs.t.Errorf("push: %v", err)
	}
	return resolved
}

func (rs *recordSender) WriteIntents(ctx context.Context, t *tidekvpb.TxnKey, writeTS hlc.Timestamp, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	// The record is created at 0 s, beside the first intents: the clock
	// moves only once it is.
	rs.waitFor(func() bool { return rs.key != nil })
	rs.mu.Lock()
	rs.intentWrites++
	n := rs.intentWrites
	rs.mu.Unlock()
	if rs.onIntents != nil {
		rs.onIntents(n)
	}
	return rs.fakeSender.WriteIntents(ctx, t, writeTS, ops)
}

func (rs *recordSender) TxnRecord(ctx context.Context, req *tidekvpb.TxnRecordRequest) (*tidekvpb.TxnRecordResponse, error) {
	rs.log("record %s", req.GetOp())
	rs.mu.Lock()
	defer rs.mu.Unlock()
	defer rs.cond.Broadcast()
	if rs.key == nil {
		rs.key = req.GetTxn()
	} else if !bytes.Equal(rs.key.GetId(), req.GetTxn().GetId()) {
		rs.t.Errorf("%s of transaction %x; the test runs only %x", req.GetOp(), req.GetTxn().GetId(), rs.key.GetId())
	}
	r := rs.rec
	final := r != nil && r.status != tidekvpb.TxnStatus_TXN_PENDING
	switch req.GetOp() {
	case tidekvpb.TxnRecordOp_TXN_HEARTBEAT:
		if (rs.loseCreation && rs.heartbeats == 0) || (rs.holdNext && rs.heartbeats > 0) {
			rs.loseCreation, rs.holdNext, rs.lost = false, false, req
			rs.heartbeats++
			return nil, errors.New("the heartbeat's deadline passed (it may apply later)")
		}
		rs.heartbeats++
		switch {
		case r == nil && req.GetRefresh():
			return nil, Mark(errors.New("no record"), ErrRetry)
		case r == nil:
			if rs.forgotten {
				rs.t.Errorf("a heartbeat at %v made the record again after it was removed", rs.now)
			}
			rs.rec = &fakeRecord{beat: rs.now}
		case final:
			rs.late++
		default:
			r.beat = max(r.beat, rs.now)
		}
	case tidekvpb.TxnRecordOp_TXN_PUSH:
		if r == nil {
			rs.rec = &fakeRecord{status: tidekvpb.TxnStatus_TXN_ABORTED}
		} else if !final && rs.now-r.beat > time.Duration(req.GetExpiryMs())*time.Millisecond {
			r.status = tidekvpb.TxnStatus_TXN_ABORTED
		}
	case tidekvpb.TxnRecordOp_TXN_COMMIT:
		if r == nil || r.status == tidekvpb.TxnStatus_TXN_ABORTED {
			return nil, Mark(errors.New("the record is missing or aborted"), ErrRetry)
		}
		r.status = tidekvpb.TxnStatus_TXN_COMMITTED
	case tidekvpb.TxnRecordOp_TXN_ABORT:
		if final && r.status == tidekvpb.TxnStatus_TXN_COMMITTED {
			return nil, Mark(errors.New("the record is committed"), ErrCommitted)
		}
		if r == nil {
			rs.rec = &fakeRecord{}
		}
		rs.rec.status = tidekvpb.TxnStatus_TXN_ABORTED
	case tidekvpb.TxnRecordOp_TXN_FORGET:
		if final {
			rs.rec, rs.forgotten = nil, true
			return &tidekvpb.TxnRecordResponse{Status: r.status}, nil
		}
	}
	if rs.rec == nil {
		return &tidekvpb.TxnRecordResponse{}, nil
	}
	return &tidekvpb.TxnRecordResponse{Status: rs.rec.status}, nil
}

// A transaction whose intents take longer to write than the expiry (three
// pieces of MaxBatchKeys, 3 s each on a slow node, against an expiry of
// 5 s) heartbeats its record all along: a reader that meets one of its
// intents after each piece finds it live, and it commits. (With its
// heartbeats begun after the intents, the push after the second piece,
// 6 s after the record's creation, aborted it.)
func TestSlowIntentsKeepTheirRecordAlive(t *testing.T) {
	rs, c, stopped := newRecordCoordinator(t)
	defer close(stopped)
	rs.onIntents = func(n int) {
		for range 3 {
			rs.advance(c.deps.Config.HeartbeatInterval)
			rs.tick()
		}
		if rs.push(c) {
			t.Errorf("a push after intent write %d, %v after the commit began, found the transaction %s; want it live", n, time.Duration(3*n)*time.Second, rs.status())
		}
	}
	writeKeys(t, c, "T", 3*c.deps.MaxBatchKeys)
	if _, err := c.End(context.Background(), meta("T"), true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// Resolved after the answer, and removed once the heartbeats stopped.
	rs.waitFor(func() bool { return rs.forgotten })
	if rs.late != 0 {
		t.Errorf("%d heartbeats found the record final", rs.late)
	}
}

// A heartbeat of the loop that timed out and applies only after the
// transaction committed and its record was removed leaves nothing: only the
// heartbeat that creates the record may create it (the fake's check of a
// record made again after its removal).
func TestLateHeartbeatDoesNotMakeTheRecordAgain(t *testing.T) {
	rs, c, stopped := newRecordCoordinator(t)
	defer close(stopped)
	rs.onIntents = func(n int) {
		if n == 1 {
			rs.mu.Lock()
			rs.holdNext = true
			rs.mu.Unlock()
			rs.advance(c.deps.Config.HeartbeatInterval)
			rs.tick()
		}
	}
	writeKeys(t, c, "T", 2*c.deps.MaxBatchKeys)
	if _, err := c.End(context.Background(), meta("T"), true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	rs.waitFor(func() bool { return rs.forgotten })
	if err := rs.applyLost(context.Background()); err == nil {
		t.Errorf("the held heartbeat, applied after the record's removal, succeeded; want it refused for want of a record")
	}
	if st := rs.status(); st != "none" {
		t.Errorf("after the late heartbeat the record is %s; want none", st)
	}
}

// A transaction whose record-creating heartbeat got no answer (its
// deadline passed; it may still apply) is aborted, and its record left
// ABORTED instead of removed: the heartbeat, applied after a removal,
// would make the record again, PENDING, and nothing would remove it.
func TestUnansweredCreationLeavesTheRecordAborted(t *testing.T) {
	rs, c, stopped := newRecordCoordinator(t)
	defer close(stopped)
	rs.loseCreation = true
	writeKeys(t, c, "T", 2*c.deps.MaxBatchKeys)
	if _, err := c.End(context.Background(), meta("T"), true); err == nil {
		t.Fatal("commit after the record's creation failed: no error")
	}
	if got := testutil.ToFloat64(c.deps.Metrics.RecordsLeft.WithLabelValues("creation_unsure")); got != 1 {
		t.Errorf("records left for an unsure creation: %v, want 1", got)
	}
	if err := rs.applyLost(context.Background()); err != nil {
		t.Errorf("the lost creation, applied late: %v", err)
	}
	if st := rs.status(); st != "TXN_ABORTED" {
		t.Errorf("after the lost creation applied, the record is %s; want ABORTED", st)
	}
	rs.fakeSender.mu.Lock()
	defer rs.fakeSender.mu.Unlock()
	if slices.Contains(rs.calls, "record TXN_FORGET") || !slices.Contains(rs.calls, "record TXN_ABORT") {
		t.Errorf("calls %q: want the record aborted and not removed", rs.calls)
	}
}

// A record aborted by a push while the intents are written (no heartbeat
// for 6 s, against an expiry of 5 s) stays aborted: the coordinator's next
// heartbeat leaves it as it is, learns of the abort and is its last; the
// transaction never asks for a commit, and its record is removed only
// after the heartbeats stopped, so that none makes it again.
func TestAbortedRecordStaysAborted(t *testing.T) {
	rs, c, stopped := newRecordCoordinator(t)
	defer close(stopped)
	rs.onIntents = func(n int) {
		if n != 2 {
			return
		}
		rs.advance(6 * time.Second)
		if !rs.push(c) {
			t.Errorf("a push 6 s after the last heartbeat found the transaction %s; want it aborted", rs.status())
		}
		rs.tick()
		rs.waitFor(func() bool { return len(rs.tickers) == 0 })
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.late != 1 || rs.rec.beat != 0 || rs.rec.status != tidekvpb.TxnStatus_TXN_ABORTED {
			t.Errorf("after the push, %d heartbeats found the record final, which is %s with its heartbeat at %v; want one, and ABORTED at 0 s",
				rs.late, rs.rec.status, rs.rec.beat)
		}
	}
	writeKeys(t, c, "T", 3*c.deps.MaxBatchKeys)
	if _, err := c.End(context.Background(), meta("T"), true); !errors.Is(err, ErrRetry) {
		t.Fatalf("commit of an aborted transaction: %v; want ErrRetry", err)
	}
	rs.waitFor(func() bool { return rs.forgotten })
	rs.fakeSender.mu.Lock()
	defer rs.fakeSender.mu.Unlock()
	if slices.Contains(rs.calls, "record TXN_COMMIT") {
		t.Errorf("calls %q: a commit was asked of a transaction known to be aborted", rs.calls)
	}
}

// A transaction whose node stops while its intents are written heartbeats
// no more: a reader that meets one of its intents finds it live up to the
// expiry after its last heartbeat, and aborts it after.
func TestStoppedCoordinatorAbortedAfterExpiry(t *testing.T) {
	rs, c, stopped := newRecordCoordinator(t)
	rs.onIntents = func(n int) {
		switch n {
		case 1:
			rs.advance(time.Second)
			rs.tick()
		case 2:
			close(stopped)
			rs.waitFor(func() bool { return len(rs.tickers) == 0 })
			rs.advance(c.deps.Config.Expiry)
			rs.tick()
			if rs.push(c) {
				t.Errorf("a push at the expiry after the last heartbeat found the transaction %s; want it live", rs.status())
			}
			rs.advance(time.Millisecond)
			if !rs.push(c) || rs.status() != "TXN_ABORTED" {
				t.Errorf("a push past the expiry found the transaction %s; want it aborted", rs.status())
			}
		}
	}
	writeKeys(t, c, "T", 3*c.deps.MaxBatchKeys)
	if _, err := c.End(context.Background(), meta("T"), true); !errors.Is(err, ErrRetry) {
		t.Fatalf("commit of an aborted transaction: %v; want ErrRetry", err)
	}
	rs.waitFor(func() bool { return rs.forgotten })
	if rs.heartbeats != 2 {
		t.Errorf("%d heartbeats; want 2 (the record's creation and one at 1 s), none after the node stopped", rs.heartbeats)
	}
}
