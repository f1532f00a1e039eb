package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/rangeops"
	"github.com/tidekv/tidekv/internal/txn"
)

// withDetail builds a status carrying an ErrorDetail clients can act on.
func withDetail(code codes.Code, msg string, d *tidekvpb.ErrorDetail) error {
	return statusWith(code, msg, d).Err()
}

func statusWith(code codes.Code, msg string, d *tidekvpb.ErrorDetail) *status.Status {
	st := status.New(code, msg)
	if ds, err := st.WithDetails(d); err == nil {
		st = ds
	}
	return st
}

// invalidError is an input-validation error, kverr's INVALID_ARGUMENT.
// The gRPC handlers that return it as it is answer it as its status
// (GRPCStatus, which gRPC asks for at its edge); in process it is
// kverr's, as the typed KV API's own validation errors are.
type invalidError struct{ error }

func (e invalidError) Unwrap() error { return e.error }

func (e invalidError) GRPCStatus() *status.Status {
	return statusWith(codes.InvalidArgument, e.Error(), &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_INVALID_ARGUMENT})
}

func overloaded(msg string) error {
	return withDetail(codes.ResourceExhausted, msg, &tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED, RetryAfterMs: 20})
}

// classify is how the node answers an error: its gRPC code and, for the
// errors clients act on, the kind its ErrorDetail carries (ERROR_UNKNOWN:
// none). It is the one mapping of the node's typed errors: toStatus builds
// the gRPC status from it, the request metrics count its code, and the
// Redis gateway answers by its kind without a status in between. An error
// that already is a status keeps its code and kind (INVALID_ARGUMENT when
// it is that code and names none).
func classify(err error) (codes.Code, tidekvpb.ErrorKind) {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		kind := errorDetail(err).GetKind()
		if st.Code() == codes.InvalidArgument && kind == tidekvpb.ErrorKind_ERROR_UNKNOWN {
			kind = tidekvpb.ErrorKind_INVALID_ARGUMENT
		}
		return st.Code(), kind
	}
	var nl *raftstore.NotLeaderError
	var rnf *raftstore.RangeNotFoundError
	var km *raftstore.KeyMismatchError
	var sr *raftstore.StaleReplicaError
	var fr *raftstore.RangeFrozenError
	var busy *raftstore.RangeBusyError
	var origin *cache.OriginError
	var ur *raftstore.UncertainReadError
	var ts *raftstore.TxnStatusError
	var changed *rangeops.ChangedError
	var refused *rangeops.RefusedError
	switch {
	case errors.As(err, &origin):
		// The key space's origin failed, not TideKV: nothing to retry
		// elsewhere (ABORTED is not retried by the Go client).
		return codes.Aborted, tidekvpb.ErrorKind_ERROR_UNKNOWN
	case errors.As(err, &busy), errors.As(err, &refused):
		// A deliberate refusal: nothing was done.
		return codes.FailedPrecondition, tidekvpb.ErrorKind_ERROR_UNKNOWN
	case errors.As(err, &changed):
		// Decided for a range that has changed since: nothing was done.
		return codes.Aborted, tidekvpb.ErrorKind_ERROR_UNKNOWN
	case errors.As(err, &fr):
		// Nothing was done; routing again finds the merged range.
		return codes.FailedPrecondition, tidekvpb.ErrorKind_RANGE_NOT_FOUND
	case errors.As(err, &sr):
		return codes.FailedPrecondition, tidekvpb.ErrorKind_STALE_REPLICA
	case errors.As(err, &nl):
		return codes.FailedPrecondition, tidekvpb.ErrorKind_NOT_LEASEHOLDER
	case errors.As(err, &rnf):
		return codes.FailedPrecondition, tidekvpb.ErrorKind_RANGE_NOT_FOUND
	case errors.As(err, &km):
		return codes.FailedPrecondition, tidekvpb.ErrorKind_KEY_MISMATCH
	case errors.As(err, &ur), raftstore.RetryableTxnError(err) || errors.Is(err, txn.ErrRetry) || errors.Is(err, kverr.ErrTxnRetry):
		return codes.Aborted, tidekvpb.ErrorKind_TXN_RETRY
	case errors.As(err, &ts) || errors.Is(err, kverr.ErrTxnCommitted):
		// A record COMMITTED already (the rest of TxnStatusError is
		// TXN_RETRY above): final. Left to the default (UNAVAILABLE), the
		// routing client retried a coordinator's abort until its deadline.
		return codes.FailedPrecondition, tidekvpb.ErrorKind_TXN_ALREADY_COMMITTED
	case errors.Is(err, kverr.ErrAmbiguous):
		// A replica's, or a step's the node sent on through its routing
		// client (a transaction's commit): it may have applied. Left to the
		// default (UNAVAILABLE: not applied), the client ran the
		// transaction again.
		return codes.Unavailable, tidekvpb.ErrorKind_AMBIGUOUS
	case errors.Is(err, kverr.ErrOverloaded):
		return codes.ResourceExhausted, tidekvpb.ErrorKind_OVERLOADED
	case errors.Is(err, kverr.ErrInvalidArgument):
		// A replica's, a validation's, or a node's refusal of a step the
		// node sent on through its routing client (a transaction's read at
		// a timestamp beyond the maximum offset of that node's clock). Left
		// to the default (UNAVAILABLE), the client ran the transaction
		// again and again.
		return codes.InvalidArgument, tidekvpb.ErrorKind_INVALID_ARGUMENT
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, tidekvpb.ErrorKind_ERROR_UNKNOWN
	case errors.Is(err, context.Canceled):
		return codes.Canceled, tidekvpb.ErrorKind_ERROR_UNKNOWN
	default:
		return codes.Unavailable, tidekvpb.ErrorKind_UNAVAILABLE
	}
}

// errCode is the gRPC code the node answers err with (OK for nil).
func errCode(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	code, _ := classify(err)
	return code
}

// errMessage is err's text as its status says it.
func errMessage(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// toStatus maps store errors to typed gRPC statuses (classify), with the
// details a client needs to act: where the leader is, when to retry.
func (s *Server) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	code, kind := classify(err)
	d := &tidekvpb.ErrorDetail{Kind: kind}
	switch kind {
	case tidekvpb.ErrorKind_ERROR_UNKNOWN:
		return status.Error(code, err.Error())
	case tidekvpb.ErrorKind_STALE_REPLICA:
		var sr *raftstore.StaleReplicaError
		errors.As(err, &sr)
		d.LeaderNodeId = sr.LeaderNodeID
	case tidekvpb.ErrorKind_NOT_LEASEHOLDER:
		var nl *raftstore.NotLeaderError
		errors.As(err, &nl)
		d.LeaderNodeId, d.Range = nl.LeaderNodeID, nl.Desc
	case tidekvpb.ErrorKind_KEY_MISMATCH:
		var km *raftstore.KeyMismatchError
		errors.As(err, &km)
		if r := s.store.LookupKey(km.Key); r != nil {
			d.Range = r.Desc()
			d.LeaderNodeId = r.LeaderNodeID()
		}
	case tidekvpb.ErrorKind_TXN_RETRY:
		if ur := (*raftstore.UncertainReadError)(nil); errors.As(err, &ur) {
			d.UncertainTimestamp = tidekvpb.FromHLC(ur.Found)
		}
	case tidekvpb.ErrorKind_OVERLOADED:
		d.RetryAfterMs = 20
	}
	if d.LeaderNodeId != 0 {
		if n, ok := s.peers.dir.Get(d.LeaderNodeId); ok {
			d.LeaderAddr = n.GetGrpcAddr()
		}
	}
	return withDetail(code, err.Error(), d)
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
