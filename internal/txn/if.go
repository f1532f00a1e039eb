package txn

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/retry"
)

// One-shot transactions (Txn.If, docs/transactions.md "One-shot
// transactions"): the node runs the whole If/Then/Else as a transaction of
// its own coordinator, through the same Get, Write and End a client's
// transaction takes, so one whose keys lie in one range commits in one
// Raft command. Since the node holds the whole transaction, it retries
// conflicts itself; the client sends one request.

// ifAttempts bounds the node's attempts at a one-shot transaction that
// keeps meeting conflicts; the client then gets the retryable error.
const ifAttempts = 10

// If runs req, retrying it from the start after a conflict.
func (c *Coordinator) If(ctx context.Context, req *tidekvpb.TxnIfRequest) (*tidekvpb.TxnIfResponse, error) {
	if err := c.checkIf(req); err != nil {
		return nil, err
	}
	var err error
	for attempt := 1; attempt <= ifAttempts; attempt++ {
		var resp *tidekvpb.TxnIfResponse
		if resp, err = c.ifOnce(ctx, req); err == nil || !retryableTxn(err) {
			return resp, err
		}
		wait := time.NewTimer(retry.Backoff(attempt, 5*time.Millisecond, 200*time.Millisecond))
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return nil, ctx.Err()
		}
	}
	return nil, err
}

func retryableTxn(err error) bool { return errors.Is(err, ErrRetry) }

// checkIf refuses a one-shot transaction without compares, with keys or
// values over the limits, or with writes a transaction cannot make.
func (c *Coordinator) checkIf(req *tidekvpb.TxnIfRequest) error {
	n := len(req.GetCompares()) + len(req.GetThenReads()) + len(req.GetElseReads()) + len(req.GetThenOps()) + len(req.GetElseOps())
	if len(req.GetCompares()) == 0 || n > c.deps.MaxBatchKeys {
		return &invalidError{fmt.Sprintf("a one-shot transaction needs 1 or more compares and at most %d keys in all, got %d compares and %d keys", c.deps.MaxBatchKeys, len(req.GetCompares()), n)}
	}
	for _, cmp := range req.GetCompares() {
		if cmp.GetOp() > tidekvpb.TxnCompare_NOT_EXISTS {
			return &invalidError{fmt.Sprintf("unknown compare operation %d on %q", cmp.GetOp(), cmp.GetKey())}
		}
		if err := c.deps.Node.CheckKey(cmp.GetKey()); err != nil {
			return err
		}
	}
	for _, ks := range [][][]byte{req.GetThenReads(), req.GetElseReads()} {
		for _, k := range ks {
			if err := c.deps.Node.CheckKey(k); err != nil {
				return err
			}
		}
	}
	for _, ops := range [][]*tidekvpb.WriteOp{req.GetThenOps(), req.GetElseOps()} {
		if len(ops) == 0 {
			continue
		}
		if err := c.deps.Node.CheckTxnOps(ops); err != nil {
			return err
		}
	}
	return nil
}

// ifOnce is one attempt: a transaction at the node's clock that reads the
// compared keys, runs the branch they choose and commits.
func (c *Coordinator) ifOnce(ctx context.Context, req *tidekvpb.TxnIfRequest) (*tidekvpb.TxnIfResponse, error) {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	meta := &tidekvpb.TxnMeta{Id: id, ReadTimestamp: tidekvpb.FromHLC(c.deps.Store.HLC().Now())}
	resp, err := c.ifBranch(ctx, meta, req)
	if err != nil {
		_, _ = c.End(ctx, meta, false)
		return nil, err
	}
	end, err := c.End(ctx, meta, true)
	if err != nil {
		return nil, err
	}
	resp.CommitTimestamp = end.GetCommitTimestamp()
	return resp, nil
}

func (c *Coordinator) ifBranch(ctx context.Context, meta *tidekvpb.TxnMeta, req *tidekvpb.TxnIfRequest) (*tidekvpb.TxnIfResponse, error) {
	resp := &tidekvpb.TxnIfResponse{Succeeded: true}
	for _, cmp := range req.GetCompares() {
		got, err := c.Get(ctx, meta, cmp.GetKey())
		if err != nil {
			return nil, err
		}
		resp.Succeeded = resp.Succeeded && compareHolds(cmp, got)
	}
	reads, ops := req.GetThenReads(), req.GetThenOps()
	if !resp.Succeeded {
		reads, ops = req.GetElseReads(), req.GetElseOps()
	}
	for _, k := range reads {
		got, err := c.Get(ctx, meta, k)
		if err != nil {
			return nil, err
		}
		resp.Reads = append(resp.Reads, got)
	}
	if len(ops) > 0 {
		if _, err := c.Write(ctx, meta, ops); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// compareHolds: an absent key holds only for NOT_EQUAL and NOT_EXISTS.
func compareHolds(cmp *tidekvpb.TxnCompare, got *tidekvpb.TxnGetResponse) bool {
	switch cmp.GetOp() {
	case tidekvpb.TxnCompare_EXISTS:
		return got.GetFound()
	case tidekvpb.TxnCompare_NOT_EXISTS:
		return !got.GetFound()
	case tidekvpb.TxnCompare_NOT_EQUAL:
		return !got.GetFound() || !bytes.Equal(got.GetValue(), cmp.GetValue())
	}
	if !got.GetFound() {
		return false
	}
	c := bytes.Compare(got.GetValue(), cmp.GetValue())
	switch cmp.GetOp() {
	case tidekvpb.TxnCompare_LESS:
		return c < 0
	case tidekvpb.TxnCompare_GREATER:
		return c > 0
	}
	return c == 0
}
