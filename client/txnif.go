package client

import (
	"context"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// CompareOp is how a Compare tests a key's value.
type CompareOp int

// Compare operations. Values compare bytewise; an absent key holds only
// for NotEqual and NotExists.
const (
	Equal CompareOp = iota
	NotEqual
	Less
	Greater
	Exists
	NotExists
)

// Compare is a condition of a one-shot transaction (TxnIf) on Key's value
// as the transaction reads it.
type Compare struct {
	Key   []byte
	Op    CompareOp
	Value []byte
}

// Branch is what a one-shot transaction does on one side: read Reads,
// then apply Ops (puts and deletes, without TTLs).
type Branch struct {
	Reads [][]byte
	Ops   []Op
}

// TxnIfResult is what a one-shot transaction did.
type TxnIfResult struct {
	// Succeeded: every compare held and the then branch ran.
	Succeeded bool
	// Reads are the branch's reads, in order (TTL is not reported).
	Reads           []GetResult
	CommitTimestamp hlc.Timestamp
}

// TxnIf runs a one-shot transaction, etcd's If/Then/Else: when every
// compare holds, then runs, else els; all in one serializable transaction
// (one Raft command when its keys lie in one range). The node retries
// conflicts; past its attempts, TxnIf starts over like Txn. A commit whose
// answer was lost is ErrAmbiguous.
func (c *Client) TxnIf(ctx context.Context, compares []Compare, then, els Branch) (TxnIfResult, error) {
	req := &tidekvpb.TxnIfRequest{ThenReads: then.Reads, ElseReads: els.Reads}
	for _, cmp := range compares {
		req.Compares = append(req.Compares, &tidekvpb.TxnCompare{Key: cmp.Key, Op: tidekvpb.TxnCompare_Op(cmp.Op), Value: cmp.Value})
	}
	var err error
	if req.ThenOps, err = txnOps(ctx, then.Ops); err != nil {
		return TxnIfResult{}, err
	}
	if req.ElseOps, err = txnOps(ctx, els.Ops); err != nil {
		return TxnIfResult{}, err
	}
	var out TxnIfResult
	err = c.txnAttempts(ctx, func(attempt int) error {
		nc, err := c.coordinator(ctx, attempt)
		if err != nil {
			return err
		}
		resp, err := nc.txn.If(ctx, req)
		if err != nil {
			return commitError("if", err)
		}
		out = TxnIfResult{Succeeded: resp.GetSucceeded(), CommitTimestamp: resp.GetCommitTimestamp().HLC()}
		for _, r := range resp.GetReads() {
			out.Reads = append(out.Reads, GetResult{Value: r.GetValue(), Found: r.GetFound()})
		}
		return nil
	})
	return out, err
}

// txnOps are a branch's ops as the API has them (none: nil).
func txnOps(ctx context.Context, ops []Op) ([]*tidekvpb.WriteOp, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	req, err := writeRequest(ctx, ops)
	if err != nil {
		return nil, err
	}
	return req.GetOps(), nil
}
