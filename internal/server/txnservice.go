package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/kvapi"
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

func (t *txnService) BatchGet(ctx context.Context, req *tidekvpb.TxnBatchGetRequest) (*tidekvpb.TxnBatchGetResponse, error) {
	resp, err := t.coord.BatchGet(ctx, req.GetTxn(), req.GetKeys())
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
		Send:  s.txn.router,
		Node: txn.Node{NeedTxnVersion: s.needTxnVersion, CheckKey: s.checkKey, CheckTxnOps: s.checkTxnOps, CheckKeySpace: s.checkKeySpace,
			User: func(ctx context.Context) (string, error) {
				id, err := s.streamIdentity(ctx)
				return id.User, err
			}},
		Config: s.cfg.Txn, MaxBatchKeys: s.cfg.Limits.MaxBatchKeys, MaxScanLimit: s.cfg.Limits.MaxScanLimit,
		ClientClock: s.cfg.Raft.TestingBreaks.ClientClock, SkipRefresh: s.cfg.Raft.TestingBreaks.SkipRefresh,
		Metrics: txn.Metrics{Commits: s.metrics.TxnCommits, Refreshes: s.metrics.TxnRefreshes, UncertainRestarts: s.metrics.TxnUncertainRestarts, RecordsLeft: s.metrics.TxnRecordsLeft},
		Stopped: s.bg.Stopped(),
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

// needTxnVersion refuses transactions before the cluster runs them.
func (s *Server) needTxnVersion() error {
	return kvNode{s}.NeedVersion(raftstore.LogVersionTxn, "a transaction")
}

// checkTxnOps is the typed API's check of a transaction's writes, as a
// status for the coordinator, which answers it as it is.
func (s *Server) checkTxnOps(ops []*tidekvpb.WriteOp) error { return s.toStatus(s.kv.CheckTxnOps(ops)) }

func (t *txnService) WriteIntents(ctx context.Context, req *tidekvpb.WriteIntentsRequest) (*tidekvpb.WriteIntentsResponse, error) {
	ts, err := t.s.kv.WriteIntents(ctx, req.GetTxn(), req.GetWriteTimestamp().HLC(), req.GetOps(), kvapi.Options{})
	if err != nil {
		return nil, t.s.toStatus(err)
	}
	return &tidekvpb.WriteIntentsResponse{WrittenAt: tidekvpb.FromHLC(ts)}, nil
}

func (t *txnService) CommitOnePhase(ctx context.Context, req *tidekvpb.OnePhaseCommitRequest) (*tidekvpb.OnePhaseCommitResponse, error) {
	ts, err := t.s.kv.CommitOnePhase(ctx, req.GetTxnId(), req.GetReadTimestamp().HLC(), req.GetReads(), req.GetReadSpans(), req.GetOps(), kvapi.Options{})
	if err != nil {
		return nil, t.s.toStatus(err)
	}
	return &tidekvpb.OnePhaseCommitResponse{CommittedAt: tidekvpb.FromHLC(ts)}, nil
}

func (t *txnService) Record(ctx context.Context, req *tidekvpb.TxnRecordRequest) (*tidekvpb.TxnRecordResponse, error) {
	resp, err := t.s.kv.TxnRecord(ctx, req, kvapi.Options{})
	return resp, t.s.toStatus(err)
}

func (t *txnService) ResolveIntents(ctx context.Context, req *tidekvpb.ResolveIntentsRequest) (*tidekvpb.ResolveIntentsResponse, error) {
	err := t.s.kv.ResolveIntents(ctx, req.GetTxn(), req.GetKeys(), req.GetCommit(), req.GetCommitTimestamp().HLC(), kvapi.Options{})
	if err != nil {
		return nil, t.s.toStatus(err)
	}
	return &tidekvpb.ResolveIntentsResponse{}, nil
}

func (t *txnService) Refresh(ctx context.Context, req *tidekvpb.RefreshRequest) (*tidekvpb.RefreshResponse, error) {
	resume, err := t.s.kv.Refresh(ctx, req.GetTxnId(), req.GetKeys(), req.GetSpan(), req.GetFrom().HLC(), req.GetTo().HLC(), kvapi.Options{})
	if err != nil {
		return nil, t.s.toStatus(err)
	}
	return &tidekvpb.RefreshResponse{ResumeKey: resume}, nil
}
