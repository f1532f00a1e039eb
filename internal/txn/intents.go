package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/retry"
)

// Requests that meet another transaction's intent (docs/transactions.md
// "Abandoned transactions, bounded"). A read must not return it and a
// write must not overwrite it, so the request pushes the intent's
// transaction at its record's range: a record found COMMITTED or ABORTED
// (or aborted by the push, its heartbeat older than the expiry) lets the
// request resolve the intent and run again; a live one makes it wait,
// with the project's back-off, for at most Config.IntentWait, and then
// fail with a retryable error (TXN_RETRY).
//
// A committing transaction's own steps (writing its intents, refreshing its
// reads: noWaitOps) do not wait: it holds intents, and two committing
// transactions each waiting for the other's would stall both for the whole
// wait. After one push that finds the holder live, they fail at once, the
// transaction rolls back (releasing its intents) and runs again after the
// client's jittered back-off. Transactions hold no intents before they
// commit (their writes wait on the coordinator), and plain requests never
// hold any, so their waits cannot close a cycle.

// noWaitOps are the request kinds (serve's op) of a committing
// transaction.
var noWaitOps = map[string]bool{"txn_write_intents": true, "txn_refresh": true}

// Wait is one request's budget for waiting on intents.
type Wait struct {
	c        *Coordinator
	deadline time.Time
	noWait   bool
	pushes   int
}

// NewWait starts the budget of a request of kind op (the node's request
// kinds, as its metrics name them).
func (c *Coordinator) NewWait(op string) *Wait {
	return &Wait{c: c, deadline: time.Now().Add(c.deps.Config.IntentWait), noWait: noWaitOps[op]}
}

// Resolve clears the way past ie: nil when the request may run again, a
// TXN_RETRY error once the wait is over. The first push goes at once, the
// next ones (a live holder, or a replica that has not applied the
// resolution yet) after a back-off.
func (w *Wait) Resolve(ctx context.Context, ie *raftstore.IntentError) error {
	for {
		if err := w.pause(ctx, ie); err != nil {
			return err
		}
		if resolved, err := w.c.Push(ctx, ie); err != nil || resolved {
			return err
		}
	}
}

// Push pushes the transaction of ie's intent once and, if its record
// is final (or the push aborted it), resolves the intent: resolved says so.
func (c *Coordinator) Push(ctx context.Context, ie *raftstore.IntentError) (resolved bool, err error) {
	txn := &tidekvpb.TxnKey{Id: ie.Txn.GetId(), Anchor: ie.Txn.GetAnchor()}
	rec, err := c.deps.Send.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: txn, Op: tidekvpb.TxnRecordOp_TXN_PUSH,
		ExpiryMs: uint32(c.deps.Config.Expiry.Milliseconds())})
	if err != nil || rec.GetStatus() == tidekvpb.TxnStatus_TXN_PENDING {
		return false, err
	}
	commit := rec.GetStatus() == tidekvpb.TxnStatus_TXN_COMMITTED
	return true, c.deps.Send.ResolveIntents(ctx, txn, [][]byte{ie.Key}, commit, rec.GetCommitTimestamp().HLC())
}

// pause waits before every push but the first, never past the deadline.
func (w *Wait) pause(ctx context.Context, ie *raftstore.IntentError) error {
	w.pushes++
	if w.pushes == 1 {
		return nil
	}
	if w.noWait {
		return &retryError{fmt.Sprintf("key %q holds an intent of transaction %x, which is running; a committing transaction does not wait for another (they could wait for each other): retry", ie.Key, ie.Txn.GetId())}
	}
	left := time.Until(w.deadline)
	if left <= 0 {
		return &retryError{fmt.Sprintf("key %q holds an intent of transaction %x, still running after a wait of %v: retry", ie.Key, ie.Txn.GetId(), w.c.deps.Config.IntentWait)}
	}
	t := time.NewTimer(min(left, retry.Backoff(w.pushes-1, 10*time.Millisecond, 200*time.Millisecond)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
