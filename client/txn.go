package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/hlc"
)

// Tx is one attempt of a transaction (Txn): serializable reads and writes
// over any keys. Its operations go to one node, its coordinator, which
// keeps the transaction while it is open (docs/transactions.md step 5).
// A Tx is not safe for concurrent use.
type Tx struct {
	nc   *nodeConn
	meta *tidekvpb.TxnMeta
}

// MaxTxnAttempts bounds how many times Txn runs a transaction that keeps
// meeting conflicts.
const MaxTxnAttempts = 20

// Txn runs fn in a transaction and commits it; when fn or the commit fails
// with ErrTxnRetry (a conflict), the transaction is rolled back and fn runs
// again from the start, with a back-off, up to MaxTxnAttempts times. Any
// other error from fn rolls the transaction back and is returned. fn must
// not keep effects outside tx it cannot repeat.
func (c *Client) Txn(ctx context.Context, fn func(tx *Tx) error) error {
	return c.txnAttempts(ctx, func(attempt int) error {
		tx, err := c.begin(ctx, attempt)
		if err != nil {
			return err
		}
		if err = fn(tx); err == nil {
			_, err = tx.end(ctx, true)
		} else {
			_, _ = tx.end(ctx, false)
		}
		return err
	})
}

// txnAttempts runs attempt again, with a back-off, while it fails with
// ErrTxnRetry, up to MaxTxnAttempts times.
func (c *Client) txnAttempts(ctx context.Context, attempt func(n int) error) error {
	var err error
	for n := 0; n < MaxTxnAttempts; n++ {
		if n > 0 && !sleep(ctx, c.backoff(n)) {
			return ctxError("transaction", ctx.Err(), err)
		}
		if err = attempt(n); !errors.Is(err, ErrTxnRetry) {
			return err
		}
	}
	return fmt.Errorf("transaction gave up after %d attempts: %w", MaxTxnAttempts, err)
}

// coordinator is the node an attempt's transaction goes to: another one
// each attempt.
func (c *Client) coordinator(ctx context.Context, attempt int) (*nodeConn, error) {
	s := c.cache.load()
	if len(s.addrs) == 0 {
		if err := c.refresh(ctx, s.epoch); err != nil {
			return nil, err
		}
		s = c.cache.load()
	}
	return c.conns.get(c.pickAny(s, nil, attempt))
}

// begin starts an attempt: an ID, a read timestamp from the client's
// clock, and a coordinator node.
func (c *Client) begin(ctx context.Context, attempt int) (*Tx, error) {
	nc, err := c.coordinator(ctx, attempt)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	return &Tx{nc: nc, meta: &tidekvpb.TxnMeta{Id: id, ReadTimestamp: wireTS(c.clock.Now())}}, nil
}

// ReadTimestamp is the timestamp the transaction reads at.
func (tx *Tx) ReadTimestamp() hlc.Timestamp { return tx.meta.GetReadTimestamp().HLC() }

// Get returns key's value as the transaction sees it (its own writes
// included), or an error wrapping ErrNotFound.
func (tx *Tx) Get(ctx context.Context, key []byte) ([]byte, error) {
	resp, err := tx.nc.txn.Get(ctx, &tidekvpb.TxnGetRequest{Txn: tx.meta, Key: key})
	if err != nil {
		return nil, txnError("get", err)
	}
	if !resp.GetFound() {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return resp.GetValue(), nil
}

// Put sets key to value when the transaction commits.
func (tx *Tx) Put(ctx context.Context, key, value []byte) error {
	return tx.write(ctx, &tidekvpb.WriteOp{Key: key, Value: value})
}

// Delete deletes key when the transaction commits.
func (tx *Tx) Delete(ctx context.Context, key []byte) error {
	return tx.write(ctx, &tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_DELETE, Key: key})
}

func (tx *Tx) write(ctx context.Context, ops ...*tidekvpb.WriteOp) error {
	_, err := tx.nc.txn.Write(ctx, &tidekvpb.TxnWriteRequest{Txn: tx.meta, Ops: ops})
	return txnError("write", err)
}

// end commits or rolls back; a commit whose answer was lost is
// ErrAmbiguous (it may have committed).
func (tx *Tx) end(ctx context.Context, commit bool) (hlc.Timestamp, error) {
	resp, err := tx.nc.txn.End(ctx, &tidekvpb.TxnEndRequest{Txn: tx.meta, Commit: commit})
	if err != nil {
		if commit {
			return hlc.Timestamp{}, commitError("commit", err)
		}
		return hlc.Timestamp{}, txnError("commit", err)
	}
	return resp.GetCommitTimestamp().HLC(), nil
}

// commitError maps the answer to a request that commits: a node that
// stopped answering after it was sent may have committed (a one-phase
// commit applies with the request), so that is ErrAmbiguous, not a retry.
func commitError(op string, err error) error {
	st := status.Convert(err)
	if cl := classify(st, errorDetail(st)); cl == classTransport && !neverSent(st) {
		return fmt.Errorf("%w: transaction %s: %s", ErrAmbiguous, op, st.Message())
	}
	err = txnError(op, err)
	if !errors.Is(err, ErrTxnRetry) && !errors.Is(err, ErrInvalidArgument) {
		return fmt.Errorf("%w: %w", ErrAmbiguous, err)
	}
	return err
}

// txnError maps a coordinator's answer: TXN_RETRY to ErrTxnRetry, refusals
// to ErrInvalidArgument, a node that did not answer to ErrTxnRetry too
// (the transaction is lost with its coordinator; its intents expire).
func txnError(op string, err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	switch classify(st, errorDetail(st)) {
	case classTxnRetry, classTransport, classUnavailable:
		return fmt.Errorf("%w: transaction %s: %s", ErrTxnRetry, op, st.Message())
	case classInvalid:
		return fmt.Errorf("%w: transaction %s: %s", ErrInvalidArgument, op, st.Message())
	}
	return fmt.Errorf("transaction %s: %s", op, st.Message())
}
