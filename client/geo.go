package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Geo transactions (docs/transactions.md, "Geo mode"): one-shot
// transactions over the cluster's geo key space, committed by the epoch
// protocol between data centres in about one inter-DC round trip. Every
// operation reads or writes its own key only, so a transaction's keys are
// known before it runs.

// GeoGet reads key; the value comes back in GeoResult.Reads.
func GeoGet(key []byte) *tidekvpb.GeoOp {
	return &tidekvpb.GeoOp{Kind: tidekvpb.GeoOp_GET, Key: key}
}

// GeoPut writes value under key.
func GeoPut(key, value []byte) *tidekvpb.GeoOp {
	return &tidekvpb.GeoOp{Kind: tidekvpb.GeoOp_PUT, Key: key, Value: value}
}

// GeoDelete removes key.
func GeoDelete(key []byte) *tidekvpb.GeoOp {
	return &tidekvpb.GeoOp{Kind: tidekvpb.GeoOp_DELETE, Key: key}
}

// GeoAdd adds delta to key's decimal integer (absent: 0).
func GeoAdd(key []byte, delta int64) *tidekvpb.GeoOp {
	return &tidekvpb.GeoOp{Kind: tidekvpb.GeoOp_ADD, Key: key, Delta: delta}
}

// GeoDebit subtracts amount from key's integer, aborting the transaction
// if that leaves less than floor.
func GeoDebit(key []byte, amount, floor int64) *tidekvpb.GeoOp {
	return &tidekvpb.GeoOp{Kind: tidekvpb.GeoOp_ADD, Key: key, Delta: -amount, Floor: floor, Floored: true}
}

// GeoCompare aborts the transaction unless key holds value (nil: unless
// key is absent).
func GeoCompare(key, value []byte) *tidekvpb.GeoOp {
	return &tidekvpb.GeoOp{Kind: tidekvpb.GeoOp_COMPARE, Key: key, Value: value, AbsentValue: value == nil}
}

// GeoResult is a decided geo transaction.
type GeoResult struct {
	// Committed, or aborted for Reason (a compare or floor that failed,
	// decided alike at every DC).
	Committed bool
	Reason    string
	// Reads are the GeoGet operations' values, in order.
	Reads []*tidekvpb.GeoRead
}

// GeoCommit runs a geo transaction in keySpace through the node at
// Config.Addrs[0], which must be the gateway of the client's data centre
// (the node with the lowest id in its locality). A transaction whose DC
// was cut off from the majority is not run and fails with ErrTxnRetry;
// one that was not decided in the node's time may still commit and fails
// with ErrAmbiguous. GeoCommit does not retry.
func (c *Client) GeoCommit(ctx context.Context, keySpace string, ops ...*tidekvpb.GeoOp) (GeoResult, error) {
	nc, err := c.conns.get(c.cfg.Addrs[0])
	if err != nil {
		return GeoResult{}, err
	}
	resp, err := tidekvpb.NewGeoClient(nc.cc).Commit(ctx, &tidekvpb.GeoCommitRequest{KeySpace: keySpace, Ops: ops})
	switch status.Code(err) {
	case codes.Aborted:
		return GeoResult{}, fmt.Errorf("%w: %w", ErrTxnRetry, err)
	case codes.DeadlineExceeded:
		if ctx.Err() == nil {
			return GeoResult{}, fmt.Errorf("%w: %w", ErrAmbiguous, err) // the node's deadline, not ours
		}
	}
	if err != nil {
		return GeoResult{}, err
	}
	return GeoResult{Committed: resp.GetCommitted(), Reason: resp.GetReason(), Reads: resp.GetReads()}, nil
}

// GeoScan reads [start, end) (end nil: to the end) of keySpace from the
// validated copy at the node at Config.Addrs[0]: the state every decided
// transaction left there. It also returns the first epoch not yet
// validated there.
func (c *Client) GeoScan(ctx context.Context, keySpace string, start, end []byte) ([]*tidekvpb.GeoRead, uint64, error) {
	nc, err := c.conns.get(c.cfg.Addrs[0])
	if err != nil {
		return nil, 0, err
	}
	resp, err := tidekvpb.NewGeoClient(nc.cc).Scan(ctx, &tidekvpb.GeoScanRequest{KeySpace: keySpace, Start: start, End: end})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetKvs(), resp.GetEpoch(), nil
}
