package txn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// End commits or rolls back the transaction meta names.
func (c *Coordinator) End(ctx context.Context, meta *tidekvpb.TxnMeta, commit bool) (*tidekvpb.TxnEndResponse, error) {
	o, err := c.ownerOf(ctx, meta)
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
		return nil, &retryError{fmt.Sprintf("transaction %x is not open on this node (it ended, ran past its deadline, or the node restarted)", meta.GetId())}
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
	commitTS, onePhase, err := c.commitOnePhase(ctx, t)
	if !onePhase && err == nil {
		commitTS, err = c.commitTwoPhases(ctx, t)
	}
	if err != nil {
		c.abort(t, err.Error())
		return nil, err
	}
	c.forget(t)
	// Its read timestamp, which it may commit at, is from this node's
	// clock, which may run ahead of its physical clock (docs/transactions.md,
	// "Uncertainty"): no acknowledged commit lies ahead of it.
	c.deps.Store.CommitWait(ctx, commitTS)
	path := "one_phase"
	if !onePhase {
		path = "two_phase"
		go c.resolveCommitted(t.key, t.writtenKeys(), commitTS, t.beating)
	}
	c.deps.Metrics.Commits.WithLabelValues(path).Inc()
	return &tidekvpb.TxnEndResponse{CommitTimestamp: tidekvpb.FromHLC(commitTS)}, nil
}

// commitOnePhase commits t in one Raft command when its reads and writes
// all lie in one range (and the cluster applies log version 8) and are at
// most MaxBatchKeys, what a range takes in one request; onePhase is false,
// with nothing written, when they do not.
func (c *Coordinator) commitOnePhase(ctx context.Context, t *openTxn) (ts hlc.Timestamp, onePhase bool, err error) {
	if c.deps.Store.LogVersion() < raftstore.LogVersionOnePhase || len(t.pending) > c.deps.MaxBatchKeys {
		return hlc.Timestamp{}, false, nil
	}
	ts, err = c.deps.Send.CommitOnePhase(ctx, t.key.GetId(), t.readTS, t.reads, t.scans, t.pending)
	if errors.Is(err, ErrNotOneRange) {
		return hlc.Timestamp{}, false, nil
	}
	return ts, true, err
}

// commitTwoPhases writes t's writes as intents, creating its record at the
// first one, then commits the record.
func (c *Coordinator) commitTwoPhases(ctx context.Context, t *openTxn) (hlc.Timestamp, error) {
	t.key.Anchor = t.pending[0].GetKey()
	for _, op := range t.pending {
		t.written[string(op.GetKey())] = true // before the attempt: an abort resolves what it may have left
	}
	// The record and the intents go out together. Whoever meets an intent
	// before its record exists aborts the transaction (a push of a missing
	// record writes it ABORTED), and creating the record then says so.
	// The record is heartbeaten from its creation on, not from the end of
	// the intents: writing MaxKeys of them, MaxBatchKeys a request, can take
	// a slow node longer than the expiry, and a reader meeting one would
	// abort the transaction as abandoned. A record not created PENDING is
	// never heartbeaten: one found final is the transaction's end, and
	// below log version 14 a heartbeat creates a missing record. This one
	// creates it; the loop's only refresh it (heartbeat).
	var rec *tidekvpb.TxnRecordResponse
	var recErr error
	created := make(chan struct{})
	beating := make(chan struct{})
	t.beating = beating
	ticks, stopTicks := c.ticker()
	go func() {
		defer close(beating)
		defer stopTicks()
		rec, recErr = c.deps.Send.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: t.key, Op: tidekvpb.TxnRecordOp_TXN_HEARTBEAT})
		// Any error: the client retries the heartbeat, so an earlier
		// attempt may still apply whatever the last one answered.
		t.creationUnsure.Store(recErr != nil)
		pending := recErr == nil && rec.GetStatus() == tidekvpb.TxnStatus_TXN_PENDING
		close(created)
		if pending {
			c.heartbeat(t, ticks)
		}
	}()
	var ts hlc.Timestamp
	err := inChunks(t.pending, c.deps.MaxBatchKeys, func(ops []*tidekvpb.WriteOp) error {
		at, err := c.deps.Send.WriteIntents(ctx, t.key, t.readTS, ops)
		ts = maxHLC(ts, at)
		return err
	})
	<-created
	if recErr == nil && rec.GetStatus() != tidekvpb.TxnStatus_TXN_PENDING {
		recErr = &retryError{fmt.Sprintf("transaction %x was aborted before it committed", t.key.GetId())}
	}
	// t.failed: a heartbeat found the record aborted meanwhile.
	if err = cmp.Or(recErr, err, t.failed()); err != nil {
		return hlc.Timestamp{}, err
	}
	commitTS := maxHLC(t.readTS, ts)
	return commitTS, c.commit(ctx, t, commitTS)
}

// commit refreshes t's reads and scans up to commitTS when its writes were pushed
// above its read timestamp, then marks its record COMMITTED there.
func (c *Coordinator) commit(ctx context.Context, t *openTxn, commitTS hlc.Timestamp) error {
	if t.readTS.Less(commitTS) && !c.deps.SkipRefresh {
		c.deps.Metrics.Refreshes.Inc()
		if err := t.refresh(ctx, c.deps.Send, commitTS); err != nil {
			return err
		}
	}
	rec, err := c.deps.Send.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: t.key, Op: tidekvpb.TxnRecordOp_TXN_COMMIT, CommitTimestamp: tidekvpb.FromHLC(commitTS)})
	if err == nil && rec.GetStatus() != tidekvpb.TxnStatus_TXN_COMMITTED {
		err = &retryError{fmt.Sprintf("transaction %x could not commit: its record is %s", t.key.GetId(), rec.GetStatus())}
	}
	return err
}

// resolveCommitted turns a committed transaction's intents into values,
// after its client was answered. One that fails stays until someone meets
// it and resolves it from the record.
func (c *Coordinator) resolveCommitted(key *tidekvpb.TxnKey, keys [][]byte, commitTS hlc.Timestamp, beating <-chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.deps.Config.MaxDuration)
	defer cancel()
	if err := c.resolve(ctx, key, keys, true, commitTS); err != nil {
		log.Printf("transaction %x: resolving its intents after the commit: %v (they are resolved by whoever meets them)", key.GetId(), err)
		return
	}
	c.forgetRecord(key, beating)
}

// forgetRecord removes a final record whose intents are all resolved,
// once the heartbeat loop (beating, nil if none) has stopped: nobody needs
// the record any more, and records would otherwise pile up. One left
// behind (a failure here) costs its few bytes.
func (c *Coordinator) forgetRecord(key *tidekvpb.TxnKey, beating <-chan struct{}) {
	if c.deps.Store.LogVersion() < raftstore.LogVersionOnePhase {
		return
	}
	if beating != nil {
		<-beating
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.deps.Config.MaxDuration)
	defer cancel()
	if _, err := c.deps.Send.TxnRecord(ctx, &tidekvpb.TxnRecordRequest{Txn: key, Op: tidekvpb.TxnRecordOp_TXN_FORGET}); err != nil {
		log.Printf("transaction %x: removing its record: %v (it stays)", key.GetId(), err)
		c.deps.Metrics.RecordsLeft.WithLabelValues("forget_failed").Inc()
	}
}

// resolve resolves (commit) or removes t's intents at keys, MaxBatchKeys
// keys a request, so that no Raft command of a range grows with the
// transaction.
func (c *Coordinator) resolve(ctx context.Context, t *tidekvpb.TxnKey, keys [][]byte, commit bool, commitTS hlc.Timestamp) error {
	return inChunks(keys, c.deps.MaxBatchKeys, func(ks [][]byte) error {
		return c.deps.Send.ResolveIntents(ctx, t, ks, commit, commitTS)
	})
}

// inChunks calls send with s in consecutive pieces of at most n, one
// after another, and stops at the first error: a transaction's writes
// and resolutions go to its ranges as requests a range takes whatever the
// transaction's size (the sender splits each piece further by range).
func inChunks[E any](s []E, n int, send func([]E) error) error {
	for len(s) > 0 {
		k := min(len(s), n)
		if err := send(s[:k]); err != nil {
			return err
		}
		s = s[k:]
	}
	return nil
}
