package client

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// A range's "overloaded, retry" that a coordinator passes on is an
// OverloadedError with the node's hint, not a conflict to retry nor a
// failure without a sentinel (the Redis front end answers EXEC with
// "ERR overloaded, retry after N ms" from it).
func TestTxnErrorOverloaded(t *testing.T) {
	st, err := status.New(codes.ResourceExhausted, "node overloaded, retry after 40ms").
		WithDetails(&tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED, RetryAfterMs: 40})
	if err != nil {
		t.Fatal(err)
	}
	got := txnError("write", st.Err())
	var oe *OverloadedError
	if !errors.As(got, &oe) || oe.RetryAfter != 40*time.Millisecond || errors.Is(got, ErrTxnRetry) {
		t.Fatalf("txnError = %v, want an OverloadedError retrying after 40ms", got)
	}
}
