package kvbatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// IsRead reports whether req only reads.
func IsRead(req *tidekvpb.KVRequest) bool {
	switch req.GetRequest().(type) {
	case *tidekvpb.KVRequest_Get, *tidekvpb.KVRequest_Scan, *tidekvpb.KVRequest_BatchGet:
		return true
	}
	return false
}

// Method is the unary method req stands for ("" for none), for role checks.
func Method(req *tidekvpb.KVRequest) string {
	switch req.GetRequest().(type) {
	case *tidekvpb.KVRequest_Get:
		return tidekvpb.KV_Get_FullMethodName
	case *tidekvpb.KVRequest_Put:
		return tidekvpb.KV_Put_FullMethodName
	case *tidekvpb.KVRequest_Delete:
		return tidekvpb.KV_Delete_FullMethodName
	case *tidekvpb.KVRequest_Scan:
		return tidekvpb.KV_Scan_FullMethodName
	case *tidekvpb.KVRequest_BatchGet:
		return tidekvpb.KV_BatchGet_FullMethodName
	case *tidekvpb.KVRequest_Write:
		return tidekvpb.KV_Write_FullMethodName
	case *tidekvpb.KVRequest_CompareAndSet:
		return tidekvpb.KV_CompareAndSet_FullMethodName
	}
	return ""
}

// Dispatch runs one request of a stream through kv's unary handler, within
// the request's own timeout, and returns its answer.
func Dispatch(ctx context.Context, kv tidekvpb.KVServer, req *tidekvpb.KVRequest) *tidekvpb.KVResponse {
	if ms := req.GetTimeoutMs(); ms > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	return Run(ctx, kv, req)
}

// Run is Dispatch for a ctx that already ends at the request's timeout
// (a node shares one such context among requests that arrived together
// with the same timeout).
func Run(ctx context.Context, kv tidekvpb.KVServer, req *tidekvpb.KVRequest) *tidekvpb.KVResponse {
	resp := &tidekvpb.KVResponse{Id: req.GetId()}
	var err error
	switch r := req.GetRequest().(type) {
	case *tidekvpb.KVRequest_Get:
		var v *tidekvpb.GetResponse
		v, err = kv.Get(ctx, r.Get)
		resp.Response = &tidekvpb.KVResponse_Get{Get: v}
	case *tidekvpb.KVRequest_Put:
		var v *tidekvpb.PutResponse
		v, err = kv.Put(ctx, r.Put)
		resp.Response = &tidekvpb.KVResponse_Put{Put: v}
	case *tidekvpb.KVRequest_Delete:
		var v *tidekvpb.DeleteResponse
		v, err = kv.Delete(ctx, r.Delete)
		resp.Response = &tidekvpb.KVResponse_Delete{Delete: v}
	case *tidekvpb.KVRequest_Scan:
		var v *tidekvpb.ScanResponse
		v, err = kv.Scan(ctx, r.Scan)
		resp.Response = &tidekvpb.KVResponse_Scan{Scan: v}
	case *tidekvpb.KVRequest_BatchGet:
		var v *tidekvpb.BatchGetResponse
		v, err = kv.BatchGet(ctx, r.BatchGet)
		resp.Response = &tidekvpb.KVResponse_BatchGet{BatchGet: v}
	case *tidekvpb.KVRequest_Write:
		var v *tidekvpb.WriteResponse
		v, err = kv.Write(ctx, r.Write)
		resp.Response = &tidekvpb.KVResponse_Write{Write: v}
	case *tidekvpb.KVRequest_CompareAndSet:
		var v *tidekvpb.CompareAndSetResponse
		v, err = kv.CompareAndSet(ctx, r.CompareAndSet)
		resp.Response = &tidekvpb.KVResponse_CompareAndSet{CompareAndSet: v}
	default:
		err = status.Error(codes.InvalidArgument, fmt.Sprintf("batch request %d carries no request this node knows (a client newer than the node?)", req.GetId()))
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// As a unary caller would see its own deadline or cancellation.
			err = status.FromContextError(err).Err()
		}
		return ErrResponse(req.GetId(), err)
	}
	return resp
}

// ErrResponse is err as the answer to request id: the status code, message
// and ErrorDetail the unary call would have returned.
func ErrResponse(id uint64, err error) *tidekvpb.KVResponse {
	st := status.Convert(err)
	resp := &tidekvpb.KVResponse{Id: id, ErrorCode: uint32(st.Code()), ErrorMessage: st.Message()}
	for _, d := range st.Details() {
		if ed, ok := d.(*tidekvpb.ErrorDetail); ok {
			resp.ErrorDetail = ed
			break
		}
	}
	return resp
}
