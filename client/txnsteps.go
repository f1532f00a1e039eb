package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
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
	var mu sync.Mutex // the ranges' answers arrive together
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
				mu.Lock()
				defer mu.Unlock()
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
// before: reads and the spans it scanned must be unchanged since readTS,
// ops become committed values. It returns the commit timestamp. It is not retried once it may
// have reached a node (ErrAmbiguous): a second attempt would find the
// first one's writes and refuse.
func (c *Client) CommitOnePhase(ctx context.Context, txnID []byte, readTS hlc.Timestamp, reads [][]byte, scans []*tidekvpb.KeySpan, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	if len(ops) == 0 {
		return hlc.Timestamp{}, fmt.Errorf("%w: one-phase commit: no writes", ErrInvalidArgument)
	}
	span := make([][]byte, 0, len(ops)+len(reads)+len(scans))
	for _, op := range ops {
		span = append(span, op.GetKey())
	}
	span = append(span, reads...)
	var ends [][]byte
	for _, sp := range scans {
		span, ends = append(span, sp.GetStartKey()), append(ends, sp.GetEndKey())
	}
	req := &tidekvpb.OnePhaseCommitRequest{TxnId: txnID, ReadTimestamp: wireTS(readTS), Reads: reads, ReadSpans: scans, Ops: ops}
	var out hlc.Timestamp
	// By the cached range map: a stale one that splits the keys costs a
	// two-phase commit, not a refresh of the map on every such commit.
	err := c.invoke(ctx, &rpc{op: "one-phase commit", key: span[0], span: span, spanEnds: ends,
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
// in one range, the ranges at once, regrouping once with a fresh range map
// when a group no longer does (a split).
func (c *Client) eachRange(ctx context.Context, op string, keys [][]byte, build func(idx []int) *rpc) error {
	if len(keys) == 0 {
		return fmt.Errorf("%w: %s: no keys", ErrInvalidArgument, op)
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	for refreshed := false; ; refreshed = true {
		groups := c.groupByRange(ctx, keys, idx)
		errs := make([]error, len(groups))
		if len(groups) == 1 {
			errs[0] = c.invoke(ctx, build(groups[0])) // one range: no goroutine
		} else {
			var wg sync.WaitGroup
			for i, g := range groups {
				r := build(g)
				wg.Go(func() { errs[i] = c.invoke(ctx, r) })
			}
			wg.Wait()
		}
		var again []int
		for i, err := range errs {
			switch {
			case errors.Is(err, errSpanChanged) && !refreshed:
				again = append(again, groups[i]...)
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

// RefreshSpans is RefreshReads for the spans a transaction scanned
// (an empty end: no bound), range by range along each span.
func (c *Client) RefreshSpans(ctx context.Context, txnID []byte, spans []*tidekvpb.KeySpan, from, to hlc.Timestamp) error {
	for _, sp := range spans {
		for start := sp.GetStartKey(); ; {
			req := &tidekvpb.RefreshRequest{TxnId: txnID, Span: &tidekvpb.KeySpan{StartKey: start, EndKey: sp.GetEndKey()}, From: wireTS(from), To: wireTS(to)}
			var resume []byte
			err := c.invoke(ctx, &rpc{op: "refresh span", key: start, idempotent: true,
				call: func(ctx context.Context, nc *nodeConn) error {
					resp, err := nc.txn.Refresh(ctx, req)
					resume = resp.GetResumeKey()
					return err
				}})
			if err != nil {
				return err
			}
			if len(resume) == 0 || (len(sp.GetEndKey()) > 0 && bytes.Compare(resume, sp.GetEndKey()) >= 0) {
				break
			}
			if bytes.Compare(resume, start) <= 0 {
				return fmt.Errorf("tidekv: refresh span: resume key %q not after start %q", resume, start)
			}
			start = resume
		}
	}
	return nil
}
