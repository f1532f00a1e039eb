package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/hlc"
)

// The range-level steps of a transaction (docs/transactions.md step 5),
// routed by key to the leaseholder of each range like KV requests. The
// coordinator and the intent resolver of a node send them through the
// node's routing client; applications use Txn (txn.go).

// WriteIntents writes ops (puts and deletes) as txn's intents at writeTS or
// above, range by range, and returns the highest timestamp written at.
// Writing the same intents again is harmless, so attempts are retried
// whatever their outcome.
func (c *Client) WriteIntents(ctx context.Context, txn *tidekvpb.TxnKey, writeTS hlc.Timestamp, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	keys := make([][]byte, len(ops))
	for i, op := range ops {
		keys[i] = op.GetKey()
	}
	var out hlc.Timestamp
	err := c.eachRange(ctx, "write intents", keys, func(idx []int) *rpc {
		req := &tidekvpb.WriteIntentsRequest{Txn: txn, WriteTimestamp: wireTS(writeTS)}
		span := make([][]byte, len(idx))
		for j, i := range idx {
			req.Ops, span[j] = append(req.Ops, ops[i]), keys[i]
		}
		return &rpc{op: "write intents", key: span[0], span: span, idempotent: true,
			call: func(ctx context.Context, nc *nodeConn) error {
				resp, err := nc.txn.WriteIntents(ctx, req)
				if err == nil && out.Less(resp.GetWrittenAt().HLC()) {
					out = resp.GetWrittenAt().HLC()
				}
				return err
			}}
	})
	return out, err
}

// ErrNotOneRange: a one-phase commit's keys do not lie in one range, by
// the client's range map. Nothing was applied; the transaction commits in
// two phases instead.
var ErrNotOneRange = errors.New("tidekv: a one-phase commit's keys span more than one range")

// CommitOnePhase commits, in one Raft command at the leaseholder of the
// range that holds every key, a transaction that has written nothing
// before: reads must be unchanged since readTS, ops become committed
// values. It returns the commit timestamp. It is not retried once it may
// have reached a node (ErrAmbiguous): a second attempt would find the
// first one's writes and refuse.
func (c *Client) CommitOnePhase(ctx context.Context, txnID []byte, readTS hlc.Timestamp, reads [][]byte, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	if len(ops) == 0 {
		return hlc.Timestamp{}, fmt.Errorf("%w: one-phase commit: no writes", ErrInvalidArgument)
	}
	span := make([][]byte, 0, len(ops)+len(reads))
	for _, op := range ops {
		span = append(span, op.GetKey())
	}
	span = append(span, reads...)
	req := &tidekvpb.OnePhaseCommitRequest{TxnId: txnID, ReadTimestamp: wireTS(readTS), Reads: reads, Ops: ops}
	var out hlc.Timestamp
	// By the cached range map: a stale one that splits the keys costs a
	// two-phase commit, not a refresh of the map on every such commit.
	err := c.invoke(ctx, &rpc{op: "one-phase commit", key: span[0], span: span,
		call: func(ctx context.Context, nc *nodeConn) error {
			resp, err := nc.txn.CommitOnePhase(ctx, req)
			out = resp.GetCommittedAt().HLC()
			return err
		}})
	if errors.Is(err, errSpanChanged) {
		return hlc.Timestamp{}, ErrNotOneRange
	}
	return out, err
}

// TxnRecord runs a step on a transaction's record (heartbeat, commit,
// abort, push), routed by its anchor. Each may run twice: a second
// heartbeat or push changes nothing that matters, a second commit or
// abort answers as the first.
func (c *Client) TxnRecord(ctx context.Context, req *tidekvpb.TxnRecordRequest) (*tidekvpb.TxnRecordResponse, error) {
	var resp *tidekvpb.TxnRecordResponse
	r := &rpc{op: "transaction record", key: req.GetTxn().GetAnchor(), idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.txn.Record(ctx, req)
			return err
		}}
	return resp, c.invoke(ctx, r)
}

// ResolveIntents commits txn's intents on keys at commitTS (commit) or
// removes them, range by range. Keys without its intent are left alone.
func (c *Client) ResolveIntents(ctx context.Context, txn *tidekvpb.TxnKey, keys [][]byte, commit bool, commitTS hlc.Timestamp) error {
	return c.eachRange(ctx, "resolve intents", keys, func(idx []int) *rpc {
		req := &tidekvpb.ResolveIntentsRequest{Txn: txn, Commit: commit, CommitTimestamp: wireTS(commitTS)}
		for _, i := range idx {
			req.Keys = append(req.Keys, keys[i])
		}
		return &rpc{op: "resolve intents", key: req.Keys[0], span: req.Keys, idempotent: true,
			call: func(ctx context.Context, nc *nodeConn) error {
				_, err := nc.txn.ResolveIntents(ctx, req)
				return err
			}}
	})
}

// eachRange runs the request build makes for each group of keys that lie
// in one range, regrouping once with a fresh range map when a group no
// longer does (a split).
func (c *Client) eachRange(ctx context.Context, op string, keys [][]byte, build func(idx []int) *rpc) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: %s: no keys", ErrInvalidArgument, op)
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	for refreshed := false; ; refreshed = true {
		var again []int
		for _, g := range c.groupByRange(ctx, keys, idx) {
			err := c.invoke(ctx, build(g))
			switch {
			case errors.Is(err, errSpanChanged) && !refreshed:
				again = append(again, g...)
			case err != nil:
				return err
			}
		}
		if len(again) == 0 {
			return nil
		}
		if err := c.refresh(ctx, c.cache.load().epoch); err != nil && ctx.Err() != nil {
			return ctxError(op, ctx.Err(), err)
		}
		idx = again
	}
}

// RefreshReads checks, range by range, that no other transaction committed
// a version of keys in (from, to], recording reads at to; a change fails
// with ErrTxnRetry.
func (c *Client) RefreshReads(ctx context.Context, txnID []byte, keys [][]byte, from, to hlc.Timestamp) error {
	return c.eachRange(ctx, "refresh reads", keys, func(idx []int) *rpc {
		req := &tidekvpb.RefreshRequest{TxnId: txnID, From: wireTS(from), To: wireTS(to)}
		for _, i := range idx {
			req.Keys = append(req.Keys, keys[i])
		}
		return &rpc{op: "refresh reads", key: req.Keys[0], span: req.Keys, idempotent: true,
			call: func(ctx context.Context, nc *nodeConn) error {
				_, err := nc.txn.Refresh(ctx, req)
				return err
			}}
	})
}
