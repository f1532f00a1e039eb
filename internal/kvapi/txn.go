package kvapi

import (
	"context"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The range-level steps of a transaction (docs/transactions.md step 5),
// each evaluated by the local replica of the range that holds its key like
// a KV request: the node's gRPC Txn service wraps them for other nodes'
// coordinators, and this node's coordinator calls them in process for the
// ranges it leads (internal/txnsend).

// CheckTxnKey refuses a transaction step before the cluster runs
// transactions, or without an ID or a record's key.
func (a *API) CheckTxnKey(k *tidekvpb.TxnKey) error {
	if err := a.node.NeedVersion(raftstore.LogVersionTxn, "a transaction"); err != nil {
		return err
	}
	if len(k.GetId()) == 0 || len(k.GetId()) > 64 {
		return kverr.Invalid("a transaction needs an ID of 1 to 64 bytes, got %d", len(k.GetId()))
	}
	return a.CheckKey(k.GetAnchor())
}

// CheckTxnOps refuses what a transaction cannot write: no ops, ops other
// than puts and deletes, TTLs kept, keys or values over the limits.
func (a *API) CheckTxnOps(ops []*tidekvpb.WriteOp) error {
	if len(ops) == 0 || len(ops) > a.limits.MaxBatchKeys {
		return kverr.Invalid("a transaction's write has %d ops; it needs 1 to %d", len(ops), a.limits.MaxBatchKeys)
	}
	for _, op := range ops {
		k, expires := op.GetKind(), op.GetTtlMs() != 0 || op.GetExpireAtMs() != 0
		if (k != tidekvpb.WriteOp_PUT && k != tidekvpb.WriteOp_DELETE) || op.GetKeepTtl() || (k == tidekvpb.WriteOp_DELETE && expires) {
			return kverr.Invalid("a transaction writes puts (with or without a TTL) and deletes; it cannot keep a key's TTL or change only its TTL (%q)", op.GetKey())
		}
		if expires {
			if err := a.node.NeedVersion(raftstore.LogVersionTxnExpiry, "a TTL in a transaction"); err != nil {
				return err
			}
		}
		if err := a.CheckKey(op.GetKey()); err != nil {
			return err
		}
		if err := a.CheckValue(op.GetValue()); err != nil {
			return err
		}
	}
	return nil
}

func txnRef(k *tidekvpb.TxnKey) *tidekvpb.TxnRef {
	return &tidekvpb.TxnRef{Id: k.GetId(), Anchor: k.GetAnchor()}
}

// WriteIntents writes ops, all in one range, as t's intents at writeTS or
// above and returns the highest timestamp one was written at.
func (a *API) WriteIntents(ctx context.Context, t *tidekvpb.TxnKey, writeTS hlc.Timestamp, ops []*tidekvpb.WriteOp, o Options) (hlc.Timestamp, error) {
	validate := func() error {
		if err := a.CheckTxnKey(t); err != nil {
			return err
		}
		if writeTS.WallTime <= 0 {
			return kverr.Invalid("intents need a write timestamp after the Unix epoch")
		}
		return a.CheckTxnOps(ops)
	}
	return Run(ctx, a, "txn_write_intents", validate, firstOpKey(ops), Growth(t, ops...), o.Replica, func(r *raftstore.Replica) (hlc.Timestamp, error) {
		return r.WriteIntents(ctx, txnRef(t), writeTS, ops)
	})
}

// CommitOnePhase commits, in one Raft command of the range holding every
// key, a transaction that read reads and scans at readTS and writes ops;
// it returns the commit timestamp.
func (a *API) CommitOnePhase(ctx context.Context, txnID []byte, readTS hlc.Timestamp, reads [][]byte, scans []*tidekvpb.KeySpan, ops []*tidekvpb.WriteOp, o Options) (hlc.Timestamp, error) {
	validate := func() error {
		if err := a.node.NeedVersion(raftstore.LogVersionOnePhase, "a one-phase commit"); err != nil {
			return err
		}
		if err := a.CheckTxnKey(&tidekvpb.TxnKey{Id: txnID, Anchor: firstOpKey(ops)}); err != nil {
			return err
		}
		if readTS.WallTime <= 0 {
			return kverr.Invalid("a one-phase commit needs its read timestamp")
		}
		for _, k := range reads {
			if err := a.CheckKey(k); err != nil {
				return err
			}
		}
		for _, sp := range scans {
			if err := a.CheckKey(sp.GetStartKey()); err != nil {
				return err
			}
		}
		return a.CheckTxnOps(ops)
	}
	return Run(ctx, a, "txn_commit_one_phase", validate, firstOpKey(ops), Growth(nil, ops...), o.Replica, func(r *raftstore.Replica) (hlc.Timestamp, error) {
		return r.CommitOnePhase(ctx, txnID, readTS, reads, scans, ops)
	})
}

// TxnRecord runs one operation on a transaction's record.
func (a *API) TxnRecord(ctx context.Context, req *tidekvpb.TxnRecordRequest, o Options) (*tidekvpb.TxnRecordResponse, error) {
	validate := func() error {
		if err := a.CheckTxnKey(req.GetTxn()); err != nil {
			return err
		}
		switch req.GetOp() {
		case tidekvpb.TxnRecordOp_TXN_COMMIT:
			if req.GetCommitTimestamp().GetWallNanos() <= 0 {
				return kverr.Invalid("a commit needs its timestamp")
			}
		case tidekvpb.TxnRecordOp_TXN_PUSH:
			if req.GetExpiryMs() == 0 {
				return kverr.Invalid("a push needs an expiry")
			}
		}
		return nil
	}
	return Run(ctx, a, "txn_record", validate, req.GetTxn().GetAnchor(), RecordGrowth(req.GetTxn()), o.Replica, func(r *raftstore.Replica) (*tidekvpb.TxnRecordResponse, error) {
		ref := txnRef(req.GetTxn())
		var rec *tidekvpb.TxnRecord
		var err error
		switch req.GetOp() {
		case tidekvpb.TxnRecordOp_TXN_HEARTBEAT:
			rec, err = r.HeartbeatTxn(ctx, ref, req.GetRefresh())
		case tidekvpb.TxnRecordOp_TXN_COMMIT:
			rec, err = r.EndTxn(ctx, ref, tidekvpb.TxnStatus_TXN_COMMITTED, req.GetCommitTimestamp().HLC())
		case tidekvpb.TxnRecordOp_TXN_ABORT:
			rec, err = r.EndTxn(ctx, ref, tidekvpb.TxnStatus_TXN_ABORTED, hlc.Timestamp{})
		case tidekvpb.TxnRecordOp_TXN_PUSH:
			rec, err = r.PushTxn(ctx, ref, a.node.TxnExpiry())
		case tidekvpb.TxnRecordOp_TXN_FORGET:
			rec, err = r.ForgetTxn(ctx, ref)
		default:
			return nil, kverr.Invalid("unknown transaction record operation %d", req.GetOp())
		}
		if err != nil {
			return nil, err
		}
		resp := &tidekvpb.TxnRecordResponse{Status: rec.GetStatus()}
		if ts := rec.GetCommitTimestamp(); ts != nil {
			resp.CommitTimestamp = &tidekvpb.Timestamp{WallNanos: ts.GetWallNanos(), Logical: ts.GetLogical()}
		}
		return resp, nil
	})
}

// ResolveIntents turns t's intents at keys, all in one range, into values
// at commitTS (commit) or removes them.
func (a *API) ResolveIntents(ctx context.Context, t *tidekvpb.TxnKey, keys [][]byte, commit bool, commitTS hlc.Timestamp, o Options) error {
	validate := func() error {
		if err := a.CheckTxnKey(t); err != nil {
			return err
		}
		if len(keys) == 0 || (commit && commitTS.WallTime <= 0) {
			return kverr.Invalid("resolving intents needs keys, and a commit its timestamp")
		}
		return nil
	}
	_, err := Run(ctx, a, "txn_resolve", validate, firstKey(keys), 0, o.Replica, func(r *raftstore.Replica) (struct{}, error) {
		st := tidekvpb.TxnStatus_TXN_ABORTED
		if commit {
			st = tidekvpb.TxnStatus_TXN_COMMITTED
		}
		return struct{}{}, r.ResolveIntents(ctx, txnRef(t), keys, st, commitTS)
	})
	return err
}

// Refresh checks that nothing transaction txnID read, keys or span (one
// of them, in one range), changed in (from, to], and records the reads at
// to. For a span it returns the key the rest of the span starts at, past
// the range (nil: none).
func (a *API) Refresh(ctx context.Context, txnID []byte, keys [][]byte, span *tidekvpb.KeySpan, from, to hlc.Timestamp, o Options) ([]byte, error) {
	key := firstKey(keys)
	if span != nil {
		key = span.GetStartKey()
	}
	validate := func() error {
		if err := a.CheckTxnKey(&tidekvpb.TxnKey{Id: txnID, Anchor: key}); err != nil {
			return err
		}
		if (len(keys) == 0) == (span == nil) || from.WallTime <= 0 {
			return kverr.Invalid("a refresh needs keys or a span, a transaction ID and its timestamps")
		}
		return nil
	}
	return Run(ctx, a, "txn_refresh", validate, key, 0, o.Replica, func(r *raftstore.Replica) ([]byte, error) {
		if span != nil {
			return r.RefreshSpan(ctx, span.GetStartKey(), span.GetEndKey(), from, to, txnID)
		}
		return nil, r.RefreshReads(ctx, keys, from, to, txnID)
	})
}

// firstKey and firstOpKey route a request by its first key (nil when it
// has none, which validation refuses before routing).
func firstKey(ks [][]byte) []byte {
	if len(ks) == 0 {
		return nil
	}
	return ks[0]
}

func firstOpKey(ops []*tidekvpb.WriteOp) []byte {
	if len(ops) == 0 {
		return nil
	}
	return ops[0].GetKey()
}
