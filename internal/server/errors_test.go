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
