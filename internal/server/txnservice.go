package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/txn"
)

// txnService serves the Txn API (docs/transactions.md step 5): the
// coordinator's operations (Get, Write, Scan, End, If: internal/txn) for
// clients, answered as gRPC statuses here, and the range-level steps, each
// evaluated by the local replica of the range that holds its key like a
// KV request.
type txnService struct {
	tidekvpb.UnimplementedTxnServer
	s     *Server
	coord *txn.Coordinator
}

func (t *txnService) Get(ctx context.Context, req *tidekvpb.TxnGetRequest) (*tidekvpb.TxnGetResponse, error) {
	resp, err := t.coord.Get(ctx, req.GetTxn(), req.GetKey())
	return resp, t.s.toStatus(innerStatus(err))
}

func (t *txnService) Write(ctx context.Context, req *tidekvpb.TxnWriteRequest) (*tidekvpb.TxnWriteResponse, error) {
	resp, err := t.coord.Write(ctx, req.GetTxn(), req.GetOps())
	return resp, t.s.toStatus(innerStatus(err))
}

func (t *txnService) Scan(ctx context.Context, req *tidekvpb.TxnScanRequest) (*tidekvpb.TxnScanResponse, error) {
	resp, err := t.coord.Scan(ctx, req.GetTxn(), req.GetStartKey(), req.GetEndKey(), int(req.GetLimit()))
	return resp, t.s.toStatus(innerStatus(err))
}

func (t *txnService) End(ctx context.Context, req *tidekvpb.TxnEndRequest) (*tidekvpb.TxnEndResponse, error) {
	if req.GetCommit() && len(req.GetOps()) > 0 {
		if _, err := t.coord.Write(ctx, req.GetTxn(), req.GetOps()); err != nil {
			return nil, t.s.toStatus(innerStatus(err))
		}
	}
	resp, err := t.coord.End(ctx, req.GetTxn(), req.GetCommit())
	return resp, t.s.toStatus(innerStatus(err))
}

func (t *txnService) If(ctx context.Context, req *tidekvpb.TxnIfRequest) (*tidekvpb.TxnIfResponse, error) {
	resp, err := t.coord.If(ctx, req)
	return resp, t.s.toStatus(innerStatus(err))
}

// innerStatus is the status a range's node answered the coordinator's
// sender with, when err carries one: its code and its own sentence, not
// the sender's wrapping around it.
func innerStatus(err error) error {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) && se.GRPCStatus().Code() != codes.Unknown {
		return se.GRPCStatus().Err()
	}
	return err
}

// newCoordinator makes the node's transaction coordinator, sending through
// the node's routing (txnclient) and checking what clients send as the KV
// service does.
func (s *Server) newCoordinator() *txn.Coordinator {
	return txn.New(txn.Deps{
		Store: lateStore{&s.store},
		Send:  s.router,
		Node: txn.Node{NeedTxnVersion: s.needTxnVersion, CheckKey: s.checkKey, CheckTxnOps: s.checkTxnOps, CheckKeySpace: s.checkKeySpace,
			User: func(ctx context.Context) (string, error) {
				id, err := s.streamIdentity(ctx)
				return id.User, err
			}},
		Config: s.cfg.Txn, MaxBatchKeys: s.cfg.Limits.MaxBatchKeys, MaxScanLimit: s.cfg.Limits.MaxScanLimit,
		ClientClock: s.cfg.Raft.TestingBreaks.ClientClock, SkipRefresh: s.cfg.Raft.TestingBreaks.SkipRefresh,
		Metrics: txn.Metrics{Commits: s.metrics.TxnCommits, Refreshes: s.metrics.TxnRefreshes, UncertainRestarts: s.metrics.TxnUncertainRestarts},
		Stopped: s.stopper,
	})
}

// lateStore is the node's store once it is made: the coordinator is made
// with the gRPC services, which serve before the node has joined.
type lateStore struct{ p **raftstore.Store }

func (l lateStore) HLC() *hlc.Clock    { return (*l.p).HLC() }
func (l lateStore) LogVersion() uint32 { return (*l.p).LogVersion() }
func (l lateStore) CommitWait(ctx context.Context, ts hlc.Timestamp) {
	(*l.p).CommitWait(ctx, ts)
}

func txnRef(k *tidekvpb.TxnKey) *tidekvpb.TxnRef {
	return &tidekvpb.TxnRef{Id: k.GetId(), Anchor: k.GetAnchor()}
}

// checkTxnKey refuses a transaction step before the cluster is at log
// version 7, or without an ID or a record's key. The version refusal
// answers UNIMPLEMENTED, which the routing client does not retry: a
// transaction fails with its sentence at once (a plain request's
// ErrLogVersion answers UNAVAILABLE and is retried, which carries it over
// the heartbeat that raises the version once an upgrade is done).
func (s *Server) checkTxnKey(k *tidekvpb.TxnKey) error {
	if err := s.needTxnVersion(); err != nil {
		return err
	}
	if len(k.GetId()) == 0 || len(k.GetId()) > 64 {
		return invalidArg("a transaction needs an ID of 1 to 64 bytes, got %d", len(k.GetId()))
	}
	return s.checkKey(k.GetAnchor())
}

func (s *Server) needTxnVersion() error {
	if err := s.store.NeedVersion(raftstore.LogVersionTxn, "a transaction"); err != nil {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return nil
}

// checkTxnOps refuses what a transaction cannot write: no ops, ops other
// than puts and deletes, TTLs kept, keys or values over the limits.
func (s *Server) checkTxnOps(ops []*tidekvpb.WriteOp) error {
	if len(ops) == 0 || len(ops) > s.cfg.Limits.MaxBatchKeys {
		return invalidArg("a transaction's write has %d ops; it needs 1 to %d", len(ops), s.cfg.Limits.MaxBatchKeys)
	}
	for _, op := range ops {
		k, expires := op.GetKind(), op.GetTtlMs() != 0 || op.GetExpireAtMs() != 0
		if (k != tidekvpb.WriteOp_PUT && k != tidekvpb.WriteOp_DELETE) || op.GetKeepTtl() || (k == tidekvpb.WriteOp_DELETE && expires) {
			return invalidArg("a transaction writes puts (with or without a TTL) and deletes; it cannot keep a key's TTL or change only its TTL (%q)", op.GetKey())
		}
		if expires {
			if err := s.store.NeedVersion(raftstore.LogVersionTxnExpiry, "a TTL in a transaction"); err != nil {
				return status.Error(codes.Unimplemented, err.Error())
			}
		}
		if err := s.checkKey(op.GetKey()); err != nil {
			return err
		}
		if err := s.checkValue(op.GetValue()); err != nil {
			return err
		}
	}
	return nil
}

func (t *txnService) WriteIntents(ctx context.Context, req *tidekvpb.WriteIntentsRequest) (*tidekvpb.WriteIntentsResponse, error) {
	s := t.s
	validate := func() error {
		if err := s.checkTxnKey(req.GetTxn()); err != nil {
			return err
		}
		if req.GetWriteTimestamp().GetWallNanos() <= 0 {
			return invalidArg("intents need a write timestamp after the Unix epoch")
		}
		return s.checkTxnOps(req.GetOps())
	}
	return serve(ctx, s, "txn_write_intents", validate, firstOpKey(req.GetOps()), growth(req.GetTxn(), req.GetOps()...), func(r *raftstore.Replica) (*tidekvpb.WriteIntentsResponse, error) {
		ts, err := r.WriteIntents(ctx, txnRef(req.GetTxn()), req.GetWriteTimestamp().HLC(), req.GetOps())
		if err != nil {
			return nil, err
		}
		return &tidekvpb.WriteIntentsResponse{WrittenAt: tidekvpb.FromHLC(ts)}, nil
	})
}

func (t *txnService) CommitOnePhase(ctx context.Context, req *tidekvpb.OnePhaseCommitRequest) (*tidekvpb.OnePhaseCommitResponse, error) {
	s := t.s
	validate := func() error {
		if err := s.store.NeedVersion(raftstore.LogVersionOnePhase, "a one-phase commit"); err != nil {
			return status.Error(codes.Unimplemented, err.Error())
		}
		if err := s.checkTxnKey(&tidekvpb.TxnKey{Id: req.GetTxnId(), Anchor: firstOpKey(req.GetOps())}); err != nil {
			return err
		}
		if req.GetReadTimestamp().GetWallNanos() <= 0 {
			return invalidArg("a one-phase commit needs its read timestamp")
		}
		for _, k := range req.GetReads() {
			if err := s.checkKey(k); err != nil {
				return err
			}
		}
		for _, sp := range req.GetReadSpans() {
			if err := s.checkKey(sp.GetStartKey()); err != nil {
				return err
			}
		}
		return s.checkTxnOps(req.GetOps())
	}
	return serve(ctx, s, "txn_commit_one_phase", validate, firstOpKey(req.GetOps()), growth(nil, req.GetOps()...), func(r *raftstore.Replica) (*tidekvpb.OnePhaseCommitResponse, error) {
		ts, err := r.CommitOnePhase(ctx, req.GetTxnId(), req.GetReadTimestamp().HLC(), req.GetReads(), req.GetReadSpans(), req.GetOps())
		if err != nil {
			return nil, err
		}
		return &tidekvpb.OnePhaseCommitResponse{CommittedAt: tidekvpb.FromHLC(ts)}, nil
	})
}

func (t *txnService) Record(ctx context.Context, req *tidekvpb.TxnRecordRequest) (*tidekvpb.TxnRecordResponse, error) {
	s := t.s
	validate := func() error {
		if err := s.checkTxnKey(req.GetTxn()); err != nil {
			return err
		}
		switch req.GetOp() {
		case tidekvpb.TxnRecordOp_TXN_COMMIT:
			if req.GetCommitTimestamp().GetWallNanos() <= 0 {
				return invalidArg("a commit needs its timestamp")
			}
		case tidekvpb.TxnRecordOp_TXN_PUSH:
			if req.GetExpiryMs() == 0 {
				return invalidArg("a push needs an expiry")
			}
		}
		return nil
	}
	return serve(ctx, s, "txn_record", validate, req.GetTxn().GetAnchor(), recordGrowth(req.GetTxn()), func(r *raftstore.Replica) (*tidekvpb.TxnRecordResponse, error) {
		ref := txnRef(req.GetTxn())
		var rec *tidekvpb.TxnRecord
		var err error
		switch req.GetOp() {
		case tidekvpb.TxnRecordOp_TXN_HEARTBEAT:
			rec, err = r.HeartbeatTxn(ctx, ref)
		case tidekvpb.TxnRecordOp_TXN_COMMIT:
			rec, err = r.EndTxn(ctx, ref, tidekvpb.TxnStatus_TXN_COMMITTED, req.GetCommitTimestamp().HLC())
		case tidekvpb.TxnRecordOp_TXN_ABORT:
			rec, err = r.EndTxn(ctx, ref, tidekvpb.TxnStatus_TXN_ABORTED, hlc.Timestamp{})
		case tidekvpb.TxnRecordOp_TXN_PUSH:
			rec, err = r.PushTxn(ctx, ref, s.cfg.Txn.Expiry)
		case tidekvpb.TxnRecordOp_TXN_FORGET:
			rec, err = r.ForgetTxn(ctx, ref)
		default:
			return nil, invalidArg("unknown transaction record operation %d", req.GetOp())
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

func (t *txnService) ResolveIntents(ctx context.Context, req *tidekvpb.ResolveIntentsRequest) (*tidekvpb.ResolveIntentsResponse, error) {
	s := t.s
	validate := func() error {
		if err := s.checkTxnKey(req.GetTxn()); err != nil {
			return err
		}
		if len(req.GetKeys()) == 0 || (req.GetCommit() && req.GetCommitTimestamp().GetWallNanos() <= 0) {
			return invalidArg("resolving intents needs keys, and a commit its timestamp")
		}
		return nil
	}
	return serve(ctx, s, "txn_resolve", validate, firstKey(req.GetKeys()), 0, func(r *raftstore.Replica) (*tidekvpb.ResolveIntentsResponse, error) {
		st := tidekvpb.TxnStatus_TXN_ABORTED
		if req.GetCommit() {
			st = tidekvpb.TxnStatus_TXN_COMMITTED
		}
		return &tidekvpb.ResolveIntentsResponse{}, r.ResolveIntents(ctx, txnRef(req.GetTxn()), req.GetKeys(), st, req.GetCommitTimestamp().HLC())
	})
}

func (t *txnService) Refresh(ctx context.Context, req *tidekvpb.RefreshRequest) (*tidekvpb.RefreshResponse, error) {
	s := t.s
	key, span := firstKey(req.GetKeys()), req.GetSpan()
	if span != nil {
		key = span.GetStartKey()
	}
	validate := func() error {
		if err := s.checkTxnKey(&tidekvpb.TxnKey{Id: req.GetTxnId(), Anchor: key}); err != nil {
			return err
		}
		if (len(req.GetKeys()) == 0) == (span == nil) || req.GetFrom().GetWallNanos() <= 0 {
			return invalidArg("a refresh needs keys or a span, a transaction ID and its timestamps")
		}
		return nil
	}
	return serve(ctx, s, "txn_refresh", validate, key, 0, func(r *raftstore.Replica) (*tidekvpb.RefreshResponse, error) {
		if span != nil {
			resume, err := r.RefreshSpan(ctx, span.GetStartKey(), span.GetEndKey(), req.GetFrom().HLC(), req.GetTo().HLC(), req.GetTxnId())
			return &tidekvpb.RefreshResponse{ResumeKey: resume}, err
		}
		return &tidekvpb.RefreshResponse{}, r.RefreshReads(ctx, req.GetKeys(), req.GetFrom().HLC(), req.GetTo().HLC(), req.GetTxnId())
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
