package server

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/retry"
)

// Requests that meet another transaction's intent (docs/transactions.md
// "Abandoned transactions, bounded"). A read must not return it and a
// write must not overwrite it, so the request pushes the intent's
// transaction at its record's range: a record found COMMITTED or ABORTED
// (or aborted by the push, its heartbeat older than the expiry) lets the
// request resolve the intent and run again; a live one makes it wait,
// with the project's back-off, for at most TxnConfig.IntentWait, and then
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

// intentWait is one request's budget for waiting on intents.
type intentWait struct {
	s        *Server
	deadline time.Time
	noWait   bool
	pushes   int
}

func (s *Server) newIntentWait(op string) *intentWait {
	return &intentWait{s: s, deadline: time.Now().Add(s.cfg.Txn.IntentWait), noWait: noWaitOps[op]}
}

// resolve clears the way past ie: nil when the request may run again, a
// TXN_RETRY error once the wait is over. The first push goes at once, the
// next ones (a live holder, or a replica that has not applied the
// resolution yet) after a back-off.
func (w *intentWait) resolve(ctx context.Context, ie *raftstore.IntentError) error {
	for {
		if err := w.pause(ctx, ie); err != nil {
			return err
		}
		if resolved, err := w.s.pushIntent(ctx, ie); err != nil || resolved {
			return err
		}
	}
}

// pushIntent pushes the transaction of ie's intent once and, if its record
// is final (or the push aborted it), resolves the intent: resolved says so.
func (s *Server) pushIntent(ctx context.Context, ie *raftstore.IntentError) (resolved bool, err error) {
	router, err := s.router()
	if err != nil {
		return false, err
	}
	txn := &tidekvpb.TxnKey{Id: ie.Txn.GetId(), Anchor: ie.Txn.GetAnchor()}
	rec, err := router.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: txn, Op: tidekvpb.TxnRecordOp_TXN_PUSH,
		ExpiryMs: uint32(s.cfg.Txn.Expiry.Milliseconds())})
	if err != nil || rec.GetStatus() == tidekvpb.TxnStatus_TXN_PENDING {
		return false, err
	}
	commit := rec.GetStatus() == tidekvpb.TxnStatus_TXN_COMMITTED
	return true, router.ResolveIntents(ctx, txn, [][]byte{ie.Key}, commit, rec.GetCommitTimestamp().HLC())
}

// sweepIntents pushes the transactions of r's intents older than the
// expiry and resolves those it finds final: the intents no request runs
// into (a dead coordinator's on keys nobody reads). The GC queue runs it
// on the ranges it leads; a live transaction's intents stay.
func (s *Server) sweepIntents(ctx context.Context, r *raftstore.Replica) {
	if !r.MayHoldIntents() {
		return
	}
	ies, err := r.Intents(maxSweptIntents)
	if err != nil {
		log.Printf("range %d: listing intents: %v", r.RangeID(), err)
		return
	}
	old := s.store.HLC().Now().WallTime - s.cfg.Txn.Expiry.Nanoseconds()
	for _, ie := range ies {
		if ie.Timestamp.WallTime > old {
			continue
		}
		if _, err := s.pushIntent(ctx, ie); err != nil {
			log.Printf("range %d: pushing the transaction of an old intent: %v", r.RangeID(), err)
			return
		}
	}
}

// maxSweptIntents bounds one range's sweep per GC round.
const maxSweptIntents = 1000

// pause waits before every push but the first, never past the deadline.
func (w *intentWait) pause(ctx context.Context, ie *raftstore.IntentError) error {
	w.pushes++
	if w.pushes == 1 {
		return nil
	}
	if w.noWait {
		return &txnRetryError{fmt.Sprintf("key %q holds an intent of transaction %x, which is running; a committing transaction does not wait for another (they could wait for each other): retry", ie.Key, ie.Txn.GetId())}
	}
	left := time.Until(w.deadline)
	if left <= 0 {
		return &txnRetryError{fmt.Sprintf("key %q holds an intent of transaction %x, still running after a wait of %v: retry", ie.Key, ie.Txn.GetId(), w.s.cfg.Txn.IntentWait)}
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

// txnRetryError is a TXN_RETRY answer the node makes itself (the others
// come from raftstore's transaction errors and from other nodes).
type txnRetryError struct{ msg string }

func (e *txnRetryError) Error() string { return e.msg }

// router is the node's routing client for the transaction steps it sends
// to other ranges: pushes, resolutions, a coordinator's operations.
func (s *Server) router() (*client.Client, error) {
	s.routerOnce.Do(func() {
		ccfg := client.DefaultConfig()
		ccfg.Addrs = []string{s.Addr()}
		ccfg.Locality = s.cfg.Locality
		ccfg.TLS = s.peerTLS()
		s.routerClient, s.routerErr = client.New(ccfg)
	})
	return s.routerClient, s.routerErr
}

// routerState is the lazily made routing client.
type routerState struct {
	routerOnce   sync.Once
	routerClient *client.Client
	routerErr    error
}
