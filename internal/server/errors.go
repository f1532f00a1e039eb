package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// withDetail builds a status carrying an ErrorDetail clients can act on.
func withDetail(code codes.Code, msg string, d *tidekvpb.ErrorDetail) error {
	st := status.New(code, msg)
	if ds, err := st.WithDetails(d); err == nil {
		st = ds
	}
	return st.Err()
}

func invalidArg(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return withDetail(codes.InvalidArgument, msg, &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_INVALID_ARGUMENT})
}

func overloaded(msg string) error {
	return withDetail(codes.ResourceExhausted, msg, &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED, RetryAfterMs: 20})
}

// toStatus maps store errors to typed gRPC statuses.
func (s *Server) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	var nl *raftstore.NotLeaderError
	var rnf *raftstore.RangeNotFoundError
	var km *raftstore.KeyMismatchError
	var sr *raftstore.StaleReplicaError
	var fr *raftstore.RangeFrozenError
	var busy *raftstore.RangeBusyError
	var origin *cache.OriginError
	var tr *txnRetryError
	var ur *raftstore.UncertainReadError
	switch {
	case errors.As(err, &origin):
		// The key space's origin failed, not TideKV: nothing to retry
		// elsewhere (ABORTED is not retried by the Go client).
		return status.Error(codes.Aborted, err.Error())
	case errors.As(err, &busy):
		// A deliberate refusal: nothing was done.
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.As(err, &fr):
		// Nothing was done; routing again finds the merged range.
		return withDetail(codes.FailedPrecondition, err.Error(), &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_RANGE_NOT_FOUND})
	case errors.As(err, &sr):
		d := &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_STALE_REPLICA, LeaderNodeId: sr.LeaderNodeID}
		if n, ok := s.dir.Get(sr.LeaderNodeID); ok {
			d.LeaderAddr = n.GetGrpcAddr()
		}
		return withDetail(codes.FailedPrecondition, err.Error(), d)
	case errors.As(err, &nl):
		d := &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_NOT_LEASEHOLDER, LeaderNodeId: nl.LeaderNodeID, Range: nl.Desc}
		if n, ok := s.dir.Get(nl.LeaderNodeID); ok {
			d.LeaderAddr = n.GetGrpcAddr()
		}
		return withDetail(codes.FailedPrecondition, err.Error(), d)
	case errors.As(err, &rnf):
		d := &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_RANGE_NOT_FOUND}
		return withDetail(codes.FailedPrecondition, err.Error(), d)
	case errors.As(err, &km):
		d := &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_KEY_MISMATCH}
		if r := s.store.LookupKey(km.Key); r != nil {
			d.Range = r.Desc()
			d.LeaderNodeId = r.LeaderNodeID()
			if n, ok := s.dir.Get(d.LeaderNodeId); ok {
				d.LeaderAddr = n.GetGrpcAddr()
			}
		}
		return withDetail(codes.FailedPrecondition, err.Error(), d)
	case errors.As(err, &ur):
		return withDetail(codes.Aborted, err.Error(), &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_TXN_RETRY, UncertainTimestamp: tidekvpb.FromHLC(ur.Found)})
	case raftstore.RetryableTxnError(err) || errors.As(err, &tr) || errors.Is(err, client.ErrTxnRetry):
		return withDetail(codes.Aborted, err.Error(), &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_TXN_RETRY})
	case errors.Is(err, raftstore.ErrAmbiguous) || errors.Is(err, client.ErrAmbiguous):
		// client's: a step the node sent on through its routing client (a
		// transaction's commit) may have applied. Left to the default
		// (UNAVAILABLE: not applied), the client ran the transaction again.
		return withDetail(codes.Unavailable, err.Error(), &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_AMBIGUOUS})
	case errors.Is(err, raftstore.ErrOverloaded) || errors.Is(err, client.ErrOverloaded):
		return overloaded(err.Error())
	case errors.Is(err, raftstore.ErrInvalidRequest):
		return invalidArg("%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		return withDetail(codes.Unavailable, err.Error(), &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_UNAVAILABLE})
	}
}

// errorKind extracts the ErrorDetail kind of a status error.
func errorDetail(err error) *tidekvpb.ErrorDetail {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if ed, ok := d.(*tidekvpb.ErrorDetail); ok {
			return ed
		}
	}
	return nil
}
