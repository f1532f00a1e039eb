package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Tx is one attempt of a transaction (Txn): serializable reads and writes
// over any keys. Its operations go to one node, its coordinator, which
// keeps the transaction while it is open (docs/transactions.md step 5).
// A Tx is not safe for concurrent use.
type Tx struct {
	nc   *nodeConn
	meta *tidekvpb.TxnMeta
	// writes wait here until the commit carries them (one message less
	// per write), a scan needs the coordinator to know them, or they
	// reach maxTxBuffered bytes or maxOps ops (Config.TxnWriteOps, so
	// that no message carries more than a node takes); written indexes
	// the last one of a key.
	maxOps  int
	writes  []*tidekvpb.WriteOp
	written map[string]int
	bytes   int
	// sent: the coordinator has heard of the transaction.
	sent bool
	// readTS is the read timestamp the coordinator last answered with.
	readTS hlc.Timestamp
}

// maxTxBuffered bounds the bytes of writes a Tx keeps before it sends
// them to its coordinator.
const maxTxBuffered = 1 << 20

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
		if n > 0 && !c.pause(ctx, c.backoff(n)) {
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

// begin starts an attempt: an ID, an owner token that only this Tx and
// its coordinator know (the proof that operations come from the client
// that began it), a proposed read timestamp from the client's clock, the
// key space ctx names (keyspace.WithName; the coordinator checks the keys
// against it), and a coordinator node. The coordinator reads at its own
// clock's time (docs/transactions.md, "Timestamps the cluster owns").
func (c *Client) begin(ctx context.Context, attempt int) (*Tx, error) {
	nc, err := c.coordinator(ctx, attempt)
	if err != nil {
		return nil, err
	}
	id, token := make([]byte, 16), make([]byte, 16)
	_, _ = rand.Read(id)
	_, _ = rand.Read(token)
	return &Tx{nc: nc, maxOps: c.cfg.TxnWriteOps, meta: &tidekvpb.TxnMeta{Id: id, ReadTimestamp: wireTS(c.clock.Now()), OwnerToken: token, Keyspace: keyspace.NameFrom(ctx)}}, nil
}

// ReadTimestamp is the timestamp the transaction reads at, as its
// coordinator last said (before its first read: the client's proposal).
func (tx *Tx) ReadTimestamp() hlc.Timestamp {
	if !tx.readTS.IsZero() {
		return tx.readTS
	}
	return tx.meta.GetReadTimestamp().HLC()
}

// noteRead keeps the read timestamp a coordinator's answer carries.
func (tx *Tx) noteRead(ts *tidekvpb.Timestamp) {
	if ts != nil {
		tx.readTS = ts.HLC()
	}
}

// Get returns key's value as the transaction sees it (its own writes
// included), or an error wrapping ErrNotFound.
func (tx *Tx) Get(ctx context.Context, key []byte) ([]byte, error) {
	r, err := tx.GetVersion(ctx, key)
	if err == nil && !r.Found {
		err = fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return r.Value, err
}

// GetVersion reads key as Get does, with its version's timestamp
// (GetResult.Version, at the transaction's read timestamp; no TTL); an
// absent key is Found false, not an error.
func (tx *Tx) GetVersion(ctx context.Context, key []byte) (GetResult, error) {
	if i, ok := tx.written[string(key)]; ok {
		op := tx.writes[i]
		return GetResult{Value: op.GetValue(), Found: op.GetKind() == tidekvpb.WriteOp_PUT, Expiry: wireExpiry(op.GetTtlMs(), op.GetExpireAtMs())}, nil
	}
	tx.sent = true
	resp, err := tx.nc.txn.Get(ctx, &tidekvpb.TxnGetRequest{Txn: tx.meta, Key: key})
	if err != nil {
		return GetResult{}, txnError("get", err)
	}
	tx.noteRead(resp.GetReadTimestamp())
	return txnGetResult(resp), nil
}

// txnGetResult is a coordinator's answer to a read as a GetResult.
func txnGetResult(r *tidekvpb.TxnGetResponse) GetResult {
	return GetResult{Value: r.GetValue(), Found: r.GetFound(), Version: r.GetVersionTimestamp().HLC(),
		Expiry: wireExpiry(r.GetTtlMs(), r.GetExpireAtMs())}
}

// BatchGet reads keys as GetVersion reads each, in one message to the
// coordinator for those the transaction has not written: a round trip
// for all of them instead of one a key. A coordinator that does not
// serve it yet (an older node) gets them one by one.
func (tx *Tx) BatchGet(ctx context.Context, keys [][]byte) ([]GetResult, error) {
	out := make([]GetResult, len(keys))
	var ask [][]byte
	var at []int
	for i, k := range keys {
		if _, ok := tx.written[string(k)]; ok {
			out[i], _ = tx.GetVersion(ctx, k)
			continue
		}
		ask, at = append(ask, k), append(at, i)
	}
	// A message carries no more keys than a node takes in one request
	// (maxOps, its limit on a request's keys too).
	for len(ask) > 0 {
		n := min(len(ask), max(tx.maxOps, 1))
		if err := tx.batchGet(ctx, keys, ask[:n], at[:n], out); err != nil {
			return nil, err
		}
		ask, at = ask[n:], at[n:]
	}
	return out, nil
}

// batchGet reads ask, keys[at[j]] each, in one message, into out[at[j]].
func (tx *Tx) batchGet(ctx context.Context, keys, ask [][]byte, at []int, out []GetResult) error {
	tx.sent = true
	resp, err := tx.nc.txn.BatchGet(ctx, &tidekvpb.TxnBatchGetRequest{Txn: tx.meta, Keys: ask})
	if status.Code(err) == codes.Unimplemented {
		for _, i := range at {
			if out[i], err = tx.GetVersion(ctx, keys[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if err != nil {
		return txnError("batch get", err)
	}
	if len(resp.GetResults()) != len(ask) {
		return fmt.Errorf("transaction batch get: %d results for %d keys", len(resp.GetResults()), len(ask))
	}
	tx.noteRead(resp.GetReadTimestamp())
	for j, r := range resp.GetResults() {
		out[at[j]] = txnGetResult(r)
	}
	return nil
}

// Scan returns up to limit keys (0: every key) of [start, end) (empty end:
// no bound) in order, as the transaction sees them (its own writes
// included). The commit fails with ErrTxnRetry if any key in the span as
// far as it was read changed, appeared or went away before it.
func (tx *Tx) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	if limit < 0 || limit > math.MaxUint32 {
		return nil, fmt.Errorf("%w: scan limit %d", ErrInvalidArgument, limit)
	}
	if err := tx.flush(ctx); err != nil {
		return nil, err
	}
	tx.sent = true
	resp, err := tx.nc.txn.Scan(ctx, &tidekvpb.TxnScanRequest{Txn: tx.meta, StartKey: start, EndKey: end, Limit: uint32(limit)})
	if err != nil {
		return nil, txnError("scan", err)
	}
	tx.noteRead(resp.GetReadTimestamp())
	out := make([]KeyValue, len(resp.GetKvs()))
	for i, kv := range resp.GetKvs() {
		out[i] = KeyValue{Key: kv.GetKey(), Value: kv.GetValue()}
	}
	return out, nil
}

// Put sets key to value when the transaction commits.
func (tx *Tx) Put(ctx context.Context, key, value []byte) error {
	return tx.write(ctx, &tidekvpb.WriteOp{Key: key, Value: value})
}

// PutExpiring is Put with an expiry (a TTL from the write, or a time);
// keeping the key's current TTL (Expiry.Keep) is not something a
// transaction's write does: write the Expiry GetVersion gave instead.
func (tx *Tx) PutExpiring(ctx context.Context, key, value []byte, e Expiry) error {
	if e.Keep {
		return fmt.Errorf("%w: a transaction cannot keep %q's TTL", ErrInvalidArgument, key)
	}
	ttl, at, err := e.wire()
	if err != nil {
		return err
	}
	return tx.write(ctx, &tidekvpb.WriteOp{Key: key, Value: value, TtlMs: ttl, ExpireAtMs: at})
}

// Delete deletes key when the transaction commits.
func (tx *Tx) Delete(ctx context.Context, key []byte) error {
	return tx.write(ctx, &tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_DELETE, Key: key})
}

// write keeps op for the commit; the coordinator checks it (limits, key
// and value sizes) when it arrives.
func (tx *Tx) write(ctx context.Context, op *tidekvpb.WriteOp) error {
	if tx.written == nil {
		tx.written = map[string]int{}
	}
	tx.written[string(op.GetKey())] = len(tx.writes)
	tx.writes = append(tx.writes, op)
	if tx.bytes += len(op.GetKey()) + len(op.GetValue()); tx.bytes >= maxTxBuffered || len(tx.writes) >= tx.maxOps {
		return tx.flush(ctx)
	}
	return nil
}

// flush sends the kept writes to the coordinator.
func (tx *Tx) flush(ctx context.Context) error {
	if len(tx.writes) == 0 {
		return nil
	}
	tx.sent = true
	_, err := tx.nc.txn.Write(ctx, &tidekvpb.TxnWriteRequest{Txn: tx.meta, Ops: tx.writes})
	tx.writes, tx.written, tx.bytes = nil, nil, 0
	return txnError("write", err)
}

// end commits, carrying the kept writes, or rolls back; a commit whose
// answer was lost is ErrAmbiguous (it may have committed). So is a commit
// that ends "overloaded": the coordinator's router may have sent the
// record's END or the one-phase commit before, without an answer. A
// transaction that read and wrote nothing ends without a message.
func (tx *Tx) end(ctx context.Context, commit bool) (hlc.Timestamp, error) {
	if !tx.sent && (!commit || len(tx.writes) == 0) {
		return tx.ReadTimestamp(), nil
	}
	req := &tidekvpb.TxnEndRequest{Txn: tx.meta, Commit: commit}
	if commit {
		req.Ops = tx.writes
	}
	resp, err := tx.nc.txn.End(ctx, req)
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
	// UNIMPLEMENTED: the cluster does not run transactions yet (checkTxnKey).
	if !errors.Is(err, ErrTxnRetry) && !errors.Is(err, ErrInvalidArgument) && st.Code() != codes.Unimplemented {
		return fmt.Errorf("%w: %w", ErrAmbiguous, err)
	}
	return err
}

// txnError maps a coordinator's answer: TXN_RETRY to ErrTxnRetry, refusals
// to ErrInvalidArgument, a node that did not answer to ErrTxnRetry too
// (the transaction is lost with its coordinator; its intents expire), and
// a range's "overloaded, retry" that the coordinator passed on to an
// OverloadedError with the node's hint (the Redis front end answers it as
// it answers any command's).
func txnError(op string, err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	d := errorDetail(st)
	switch classify(st, d) {
	case classTxnRetry, classTransport, classUnavailable:
		return fmt.Errorf("%w: transaction %s: %s", ErrTxnRetry, op, st.Message())
	case classInvalid:
		return fmt.Errorf("%w: transaction %s: %s", ErrInvalidArgument, op, st.Message())
	case classOverloaded:
		return &OverloadedError{Op: "transaction " + op, RetryAfter: time.Duration(d.GetRetryAfterMs()) * time.Millisecond, Reason: st.Message()}
	}
	return fmt.Errorf("transaction %s: %s", op, st.Message())
}
