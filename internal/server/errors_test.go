package server

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/rangeops"
)

// An error a node's routing client returns for a step it sent on (a
// transaction's commit) keeps its meaning in the node's answer: an
// ambiguous one must not read as "unavailable, not applied", which a
// client retries, running a transaction that committed again.
func TestToStatusKeepsTheRoutersAmbiguity(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct {
		err  error
		code codes.Code
		kind tidekvpb.ErrorKind
	}{
		{fmt.Errorf("%w: one-phase commit: the write may have applied", client.ErrAmbiguous), codes.Unavailable, tidekvpb.ErrorKind_AMBIGUOUS},
		{raftstore.ErrAmbiguous, codes.Unavailable, tidekvpb.ErrorKind_AMBIGUOUS},
		{fmt.Errorf("%w: shed", client.ErrOverloaded), codes.ResourceExhausted, tidekvpb.ErrorKind_OVERLOADED},
		{errors.New("something else"), codes.Unavailable, tidekvpb.ErrorKind_UNAVAILABLE},
	} {
		st := status.Convert(s.toStatus(tc.err))
		if d := errorDetail(st.Err()); st.Code() != tc.code || d.GetKind() != tc.kind {
			t.Errorf("%v: answered %v with kind %v, want %v with %v", tc.err, st.Code(), d.GetKind(), tc.code, tc.kind)
		}
	}
}

// A node's refusal of a step the node sent on through its routing client
// (client.ErrInvalidArgument, or the status itself when it is passed on)
// stays INVALID_ARGUMENT in the node's answer, which no client retries:
// read as UNAVAILABLE, a transaction that can never succeed ran again and
// again.
func TestClassifyKeepsTheRoutersInvalidArgument(t *testing.T) {
	s := &Server{}
	for _, err := range []error{
		fmt.Errorf("%w: read timestamp is in the future, more than the maximum clock offset ahead", client.ErrInvalidArgument),
		fmt.Errorf("transaction get: %w", fmt.Errorf("%w: key too large", client.ErrInvalidArgument)),
		status.Error(codes.InvalidArgument, "key too large"),
		fmt.Errorf("get: %w", &raftstore.GCThresholdError{RangeID: 7}), // final: the versions may be gone
		fmt.Errorf("routed: %w", status.Error(codes.InvalidArgument, "key too large")),
		fmt.Errorf("%w: no such range", raftstore.ErrInvalidRequest),
	} {
		if code, kind := classify(err); code != codes.InvalidArgument || kind != tidekvpb.ErrorKind_INVALID_ARGUMENT {
			t.Errorf("classify(%v) = %v, %v; want InvalidArgument, INVALID_ARGUMENT", err, code, kind)
		}
		if st := status.Convert(s.toStatus(innerStatus(err))); st.Code() != codes.InvalidArgument {
			t.Errorf("%v: answered %v, want InvalidArgument", err, st.Code())
		}
	}
}

// A transaction's end that its record refuses (raftstore.TxnStatusError)
// is final: a commit of a record ABORTED or absent (aborted and cleaned
// up) fails the transaction (TXN_RETRY: running it again may succeed), an
// abort of a record COMMITTED already is TXN_ALREADY_COMMITTED. Left to
// the default (UNAVAILABLE), the routing client retried both until its
// deadline; the client's own sentinels keep their class through a node.
func TestClassifyTxnStatus(t *testing.T) {
	ref := &tidekvpb.TxnRef{Id: []byte("t"), Anchor: []byte("k")}
	for _, tc := range []struct {
		err  error
		code codes.Code
		kind tidekvpb.ErrorKind
	}{
		{&raftstore.TxnStatusError{Txn: ref, Status: tidekvpb.TxnStatus_TXN_ABORTED, Found: true}, codes.Aborted, tidekvpb.ErrorKind_TXN_RETRY},
		{&raftstore.TxnStatusError{Txn: ref, Found: false}, codes.Aborted, tidekvpb.ErrorKind_TXN_RETRY},
		{&raftstore.TxnStatusError{Txn: ref, Status: tidekvpb.TxnStatus_TXN_COMMITTED, Found: true}, codes.FailedPrecondition, tidekvpb.ErrorKind_TXN_ALREADY_COMMITTED},
		{fmt.Errorf("%w: abort", client.ErrTxnCommitted), codes.FailedPrecondition, tidekvpb.ErrorKind_TXN_ALREADY_COMMITTED},
	} {
		if code, kind := classify(tc.err); code != tc.code || kind != tc.kind {
			t.Errorf("classify(%v) = %v, %v; want %v, %v", tc.err, code, kind, tc.code, tc.kind)
		}
	}
}

// The range operations' refusals are typed in process (the control loop's
// operators see them so) and answered at the gRPC edge as the statuses
// the admin service sent before they were: the same code, the same
// message, no detail.
func TestRangeOpRefusalsAtTheEdge(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{&rangeops.ChangedError{RangeID: 9, Decided: 3, Now: 4}, codes.Aborted,
			"range 9 changed since the split was decided (generation 3, now 4): nothing done"},
		{&rangeops.RefusedError{Node: 2, Why: errClockUntrusted}, codes.FailedPrecondition,
			"node 2: its clock is not trusted (offset monitor), so it takes no leases"},
	} {
		st := status.Convert(s.toStatus(tc.err))
		if st.Code() != tc.code || st.Message() != tc.msg || len(st.Details()) != 0 {
			t.Errorf("%T answered %v %q with %d details; want %v %q with none", tc.err, st.Code(), st.Message(), len(st.Details()), tc.code, tc.msg)
		}
	}
}
