package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// End commits or rolls back the transaction meta names.
func (c *coordinator) End(ctx context.Context, meta *tidekvpb.TxnMeta, commit bool) (*tidekvpb.TxnEndResponse, error) {
	o, err := c.s.ownerOf(ctx, meta)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	t := c.txns[string(meta.GetId())]
	c.mu.Unlock()
	if t != nil {
		if err := t.owner.check(o, meta.GetId()); err != nil {
			return nil, err
		}
	}
	if t == nil {
		if !commit {
			return &tidekvpb.TxnEndResponse{}, nil // nothing of it is open here
		}
		return nil, &txnRetryError{fmt.Sprintf("transaction %x is not open on this node (it ended, ran past its deadline, or the node restarted)", meta.GetId())}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.failed(); err != nil {
		c.abort(t, err.Error()) // cleans what a push left, if it has not already
		return nil, err
	}
	if !commit {
		c.abort(t, "the client rolled it back")
		return &tidekvpb.TxnEndResponse{}, nil
	}
	if len(t.pending) == 0 {
		// Read-only: its reads are one snapshot at the read timestamp.
		c.forget(t)
		return &tidekvpb.TxnEndResponse{CommitTimestamp: tidekvpb.FromHLC(t.readTS)}, nil
	}
	router, err := c.s.router()
	if err != nil {
		c.abort(t, err.Error())
		return nil, err
	}
	commitTS, onePhase, err := c.commitOnePhase(ctx, t, router)
	if !onePhase && err == nil {
		commitTS, err = c.commitTwoPhases(ctx, t, router)
	}
	if err != nil {
		c.abort(t, err.Error())
		return nil, err
	}
	c.forget(t)
	// Its read timestamp, which it may commit at, is from this node's
	// clock, which may run ahead of its physical clock (docs/transactions.md,
	// "Uncertainty"): no acknowledged commit lies ahead of it.
	c.s.store.CommitWait(ctx, commitTS)
	path := "one_phase"
	if !onePhase {
		path = "two_phase"
		go c.resolveCommitted(t.key, t.writtenKeys(), commitTS, t.beating)
	}
	c.s.metrics.TxnCommits.WithLabelValues(path).Inc()
	return &tidekvpb.TxnEndResponse{CommitTimestamp: tidekvpb.FromHLC(commitTS)}, nil
}

// commitOnePhase commits t in one Raft command when its reads and writes
// all lie in one range (and the cluster applies log version 8); onePhase
// is false, with nothing written, when they do not.
func (c *coordinator) commitOnePhase(ctx context.Context, t *openTxn, router *client.Client) (ts hlc.Timestamp, onePhase bool, err error) {
	if c.s.store.LogVersion() < raftstore.LogVersionOnePhase {
		return hlc.Timestamp{}, false, nil
	}
	ts, err = router.CommitOnePhase(ctx, t.key.GetId(), t.readTS, t.reads, t.scans, t.pending)
	if errors.Is(err, client.ErrNotOneRange) {
		return hlc.Timestamp{}, false, nil
	}
	return ts, true, err
}

// commitTwoPhases writes t's writes as intents, creating its record at the
// first one, then commits the record.
func (c *coordinator) commitTwoPhases(ctx context.Context, t *openTxn, router *client.Client) (hlc.Timestamp, error) {
	t.key.Anchor = t.pending[0].GetKey()
	for _, op := range t.pending {
		t.written[string(op.GetKey())] = true // before the attempt: an abort resolves what it may have left
	}
	// The record and the intents go out together. Whoever meets an intent
	// before its record exists aborts the transaction (a push of a missing
	// record writes it ABORTED), and creating the record then says so.
	var rec *tidekvpb.TxnRecordResponse
	var recErr error
	created := make(chan struct{})
	go func() {
		defer close(created)
		rec, recErr = router.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: t.key, Op: tidekvpb.TxnRecordOp_TXN_HEARTBEAT})
	}()
	ts, err := router.WriteIntents(ctx, t.key, t.readTS, t.pending)
	<-created
	if recErr == nil && rec.GetStatus() != tidekvpb.TxnStatus_TXN_PENDING {
		recErr = &txnRetryError{fmt.Sprintf("transaction %x was aborted before it committed", t.key.GetId())}
	}
	if err = cmp.Or(recErr, err); err != nil {
		return hlc.Timestamp{}, err
	}
	t.beating = make(chan struct{})
	go c.heartbeat(t, t.beating)
	commitTS := maxHLC(t.readTS, ts)
	return commitTS, c.commit(ctx, t, router, commitTS)
}

// commit refreshes t's reads and scans up to commitTS when its writes were pushed
// above its read timestamp, then marks its record COMMITTED there.
func (c *coordinator) commit(ctx context.Context, t *openTxn, router *client.Client, commitTS hlc.Timestamp) error {
	if t.readTS.Less(commitTS) && !c.s.cfg.Raft.TestingBreaks.SkipRefresh {
		c.s.metrics.TxnRefreshes.Inc()
		if err := t.refresh(ctx, router, commitTS); err != nil {
			return err
		}
	}
	rec, err := router.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: t.key, Op: tidekvpb.TxnRecordOp_TXN_COMMIT, CommitTimestamp: tidekvpb.FromHLC(commitTS)})
	if err == nil && rec.GetStatus() != tidekvpb.TxnStatus_TXN_COMMITTED {
		err = &txnRetryError{fmt.Sprintf("transaction %x could not commit: its record is %s", t.key.GetId(), rec.GetStatus())}
	}
	return err
}

// resolveCommitted turns a committed transaction's intents into values,
// after its client was answered. One that fails stays until someone meets
// it and resolves it from the record.
func (c *coordinator) resolveCommitted(key *tidekvpb.TxnKey, keys [][]byte, commitTS hlc.Timestamp, beating <-chan struct{}) {
	router, err := c.s.router()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.Txn.MaxDuration)
		defer cancel()
		err = router.ResolveIntents(ctx, key, keys, true, commitTS)
	}
	if err != nil {
		log.Printf("transaction %x: resolving its intents after the commit: %v (they are resolved by whoever meets them)", key.GetId(), err)
		return
	}
	c.forgetRecord(router, key, beating)
}

// forgetRecord removes a final record whose intents are all resolved,
// once the heartbeat loop (beating, nil if none) has stopped: nobody needs
// the record any more, and records would otherwise pile up. One left
// behind (a failure here) costs its few bytes.
func (c *coordinator) forgetRecord(router *client.Client, key *tidekvpb.TxnKey, beating <-chan struct{}) {
	if c.s.store.LogVersion() < raftstore.LogVersionOnePhase {
		return
	}
	if beating != nil {
		<-beating
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.Txn.MaxDuration)
	defer cancel()
	if _, err := router.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: key, Op: tidekvpb.TxnRecordOp_TXN_FORGET}); err != nil {
		log.Printf("transaction %x: removing its record: %v (it stays)", key.GetId(), err)
	}
}

func (t *txnService) Get(ctx context.Context, req *tidekvpb.TxnGetRequest) (*tidekvpb.TxnGetResponse, error) {
	resp, err := t.coord.Get(ctx, req.GetTxn(), req.GetKey())
	return resp, t.s.toStatus(innerStatus(err))
}

func (t *txnService) Write(ctx context.Context, req *tidekvpb.TxnWriteRequest) (*tidekvpb.TxnWriteResponse, error) {
	resp, err := t.coord.Write(ctx, req.GetTxn(), req.GetOps())
	return resp, t.s.toStatus(innerStatus(err))
}

func (t *txnService) End(ctx context.Context, req *tidekvpb.TxnEndRequest) (*tidekvpb.TxnEndResponse, error) {
	if req.GetCommit() && len(req.GetOps()) > 0 {
		if _, err := t.coord.Write(ctx, req.GetTxn(), req.GetOps()); err != nil {
			return nil, t.s.toStatus(innerStatus(err))
		}
	}
	resp, err := t.coord.End(ctx, req.GetTxn(), req.GetCommit())
	return resp, t.s.toStatus(innerStatus(err))
}

// innerStatus is the status a range's node answered the coordinator's
// router with, when err carries one: its code and its own sentence, not
// the router's wrapping around it.
func innerStatus(err error) error {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) && se.GRPCStatus().Code() != codes.Unknown {
		return se.GRPCStatus().Err()
	}
	return err
}
