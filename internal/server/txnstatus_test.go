package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

// Ending a transaction's record against its state answers at once with a
// typed error, through the routing client a coordinator uses: a commit of
// a record that is missing or ABORTED fails the transaction (ErrTxnRetry),
// an abort of a COMMITTED one is ErrTxnCommitted. Answered UNAVAILABLE,
// the client retried each until its deadline (5 s here).
func TestTxnEndOnFinalRecordFailsAtOnce(t *testing.T) {
	tc := startClusterWith(t, 1, nil)
	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A new cluster takes transactions at once (it starts at its binary's
	// log version).
	if err := c.Txn(ctx, func(tx *client.Tx) error { return tx.Put(ctx, []byte("first"), []byte("x")) }); err != nil {
		t.Fatalf("a first transaction: %v", err)
	}
	record := func(id string, op tidekvpb.TxnRecordOp) (time.Duration, error) {
		req := &tidekvpb.TxnRecordRequest{Txn: &tidekvpb.TxnKey{Id: []byte(id), Anchor: []byte("status-" + id)}, Op: op}
		if op == tidekvpb.TxnRecordOp_TXN_COMMIT {
			req.CommitTimestamp = tidekvpb.FromHLC(hlc.Timestamp{WallTime: time.Now().UnixNano()})
		}
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		start := time.Now()
		_, err := c.TxnRecord(sctx, req)
		return time.Since(start), err
	}
	must := func(id string, op tidekvpb.TxnRecordOp) {
		if _, err := record(id, op); err != nil {
			t.Fatalf("%s of %s: %v", op, id, err)
		}
	}
	must("aborted", tidekvpb.TxnRecordOp_TXN_ABORT)
	must("committed", tidekvpb.TxnRecordOp_TXN_HEARTBEAT)
	must("committed", tidekvpb.TxnRecordOp_TXN_COMMIT)
	for _, step := range []struct {
		id   string
		op   tidekvpb.TxnRecordOp
		want error
	}{
		{"missing", tidekvpb.TxnRecordOp_TXN_COMMIT, client.ErrTxnRetry},
		{"aborted", tidekvpb.TxnRecordOp_TXN_COMMIT, client.ErrTxnRetry},
		{"committed", tidekvpb.TxnRecordOp_TXN_ABORT, client.ErrTxnCommitted},
	} {
		took, err := record(step.id, step.op)
		// 2 s: one answer of an idle one-node cluster, not the 5 s deadline.
		if !errors.Is(err, step.want) || took > 2*time.Second {
			t.Errorf("%s of the %s record: %v after %v; want %v at once", step.op, step.id, err, took, step.want)
		}
	}
}
