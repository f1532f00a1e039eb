package client

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Errors returned by the client; test for them with errors.Is. Returned
// errors wrap these and carry the server's message where there is one.
// All but ErrClosed and ErrNoReadAt are TideKV's one error vocabulary
// (api/kverr): errors.Is(err, ErrOverloaded) holds for a node's overload
// as for the client's.
var (
	// ErrNotFound: Get found no value for the key.
	ErrNotFound error = kverr.ErrNotFound
	// ErrAmbiguous: a non-idempotent write may or may not have been applied.
	ErrAmbiguous error = kverr.ErrAmbiguous
	// ErrOverloaded: the cluster kept shedding load until attempts or the
	// deadline ran out.
	ErrOverloaded error = kverr.ErrOverloaded
	// ErrUnavailable: no replica could serve the request within the attempts.
	ErrUnavailable error = kverr.ErrUnavailable
	// ErrInvalidArgument: the request was rejected as malformed or too large;
	// never retried.
	ErrInvalidArgument error = kverr.ErrInvalidArgument
	// ErrClosed: the Client has been closed.
	ErrClosed = errors.New("tidekv: client closed")
	// ErrTxnRetry: a transaction cannot go on as it is (it met another
	// transaction's intent that did not go away in time, wrote below a
	// newer committed version, its reads changed before its commit, or it
	// was aborted); running it again from the start may succeed. Txn does.
	ErrTxnRetry error = kverr.ErrTxnRetry
	// ErrTxnCommitted: a transaction's record is COMMITTED already, so it
	// cannot be aborted (a coordinator's abort after a commit whose answer
	// was lost); never retried. Its intents are resolved from the record.
	ErrTxnCommitted error = kverr.ErrTxnCommitted
	// ErrNoReadAt: a node answered a read at a timestamp (ReadAt) with the
	// newest data, as a binary from before reads at timestamps does: they
	// need every node of the cluster upgraded.
	ErrNoReadAt = errors.New("tidekv: a node read the newest data instead of at the timestamp (its binary predates reads at timestamps)")
)

// UncertainReadError: a transaction's read (TxnReadAt with an uncertainty
// limit) found a committed version at Timestamp, above its read timestamp
// and within its uncertainty window; it wraps ErrTxnRetry. A transaction
// coordinator raises the read timestamp to Timestamp and refreshes
// (docs/transactions.md, "Uncertainty").
type UncertainReadError struct {
	Timestamp hlc.Timestamp
	Reason    string // the serving node's sentence
}

func (e *UncertainReadError) Error() string { return ErrTxnRetry.Error() + ": " + e.Reason }

func (e *UncertainReadError) Unwrap() error { return ErrTxnRetry }

// errorDetail returns the ErrorDetail a TideKV server attaches to its
// statuses, or nil.
func errorDetail(st *status.Status) *tidekvpb.ErrorDetail {
	for _, d := range st.Details() {
		if ed, ok := d.(*tidekvpb.ErrorDetail); ok {
			return ed
		}
	}
	return nil
}

// errClass is what the retry loop does about a failed attempt.
type errClass int

const (
	classFatal        errClass = iota // return to the caller as is
	classInvalid                      // ErrInvalidArgument, never retried
	classTxnRetry                     // ErrTxnRetry: the transaction restarts, not the request
	classTxnCommitted                 // ErrTxnCommitted: final, never retried
	classNotFound                     // ErrNotFound
	classNotLeader                    // NOT_LEASEHOLDER: redirect
	classStale                        // RANGE_NOT_FOUND / KEY_MISMATCH: fix the cache
	classAmbiguous                    // AMBIGUOUS from the server
	classOverloaded                   // OVERLOADED: wait retry_after
	classUnavailable                  // the server said UNAVAILABLE: the request was not applied
	classTransport                    // no usable answer from the node (conn refused, reset, attempt timeout)
	classStaleReplica                 // STALE_REPLICA: a bounded read reached a replica too far behind
)

// classify maps an attempt's error to what to do about it. The ErrorDetail
// kind wins over the status code: the code is only a fallback for servers
// (or proxies) that send none.
func classify(st *status.Status, d *tidekvpb.ErrorDetail) errClass {
	switch d.GetKind() {
	case tidekvpb.ErrorKind_NOT_LEASEHOLDER:
		return classNotLeader
	case tidekvpb.ErrorKind_RANGE_NOT_FOUND, tidekvpb.ErrorKind_KEY_MISMATCH:
		return classStale
	case tidekvpb.ErrorKind_AMBIGUOUS:
		return classAmbiguous
	case tidekvpb.ErrorKind_OVERLOADED:
		return classOverloaded
	case tidekvpb.ErrorKind_INVALID_ARGUMENT:
		return classInvalid
	case tidekvpb.ErrorKind_UNAVAILABLE:
		return classUnavailable
	case tidekvpb.ErrorKind_STALE_REPLICA:
		return classStaleReplica
	case tidekvpb.ErrorKind_TXN_RETRY:
		return classTxnRetry
	case tidekvpb.ErrorKind_TXN_ALREADY_COMMITTED:
		return classTxnCommitted
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		return classInvalid
	case codes.NotFound:
		return classNotFound
	case codes.FailedPrecondition:
		return classStale
	case codes.ResourceExhausted:
		if tooLarge(st) != nil {
			return classInvalid
		}
		return classOverloaded
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		// Without a detail these come from the transport (or the attempt's
		// own timeout), not from TideKV's request evaluation.
		return classTransport
	}
	return classFatal
}

// neverSent reports whether a transport failure happened before the request
// left the client (the connection could not be established), so that even a
// non-idempotent request can safely be retried. gRPC gives no typed signal for
// this; its status message for dial failures is the only evidence, and when
// in doubt we report "maybe sent", which is always safe.
// refusedOutright reports whether a node's answer says it did nothing: it
// shed the request, is not the leaseholder, or holds no such range.
func refusedOutright(c errClass, d *tidekvpb.ErrorDetail) bool {
	switch c {
	case classOverloaded, classNotLeader, classStaleReplica, classStale:
		return d != nil
	}
	return false
}

func neverSent(st *status.Status) bool {
	if st.Code() != codes.Unavailable {
		return false
	}
	if strings.HasPrefix(st.Message(), notSentMessage) {
		return true
	}
	m := strings.ToLower(st.Message())
	return strings.Contains(m, "while dialing") || strings.Contains(m, "connection refused")
}

// grpcTooLarge matches gRPC's refusal of a message over its size limit,
// raised by the sender ("trying to send message larger than max (N vs. M)")
// or the receiver ("received message larger than max (N vs. M)").
var grpcTooLarge = regexp.MustCompile(`message (?:after decompression )?larger than max \((\d+) vs\. (\d+)\)`)

// tooLarge returns the message size and the limit of a gRPC size refusal,
// or nil. Such a refusal carries no TideKV ErrorDetail, and without this it
// would read as the node shedding load (ResourceExhausted) and be retried.
func tooLarge(st *status.Status) []string {
	if st.Code() != codes.ResourceExhausted {
		return nil
	}
	m := grpcTooLarge.FindStringSubmatch(st.Message())
	if m == nil {
		return nil
	}
	return m[1:]
}

// invalidReason is the one-sentence reason of a refused request.
func invalidReason(st *status.Status) string {
	if m := tooLarge(st); m != nil {
		return fmt.Sprintf("request of %s bytes is too large (a node accepts at most %s bytes per message)", m[0], m[1])
	}
	return st.Message()
}

// OverloadedError is a node's "overloaded, retry" passed on at once
// (Config.FailFastOnOverload); errors.Is(err, ErrOverloaded) holds.
type OverloadedError struct {
	Op string
	// RetryAfter is how long the node asked its clients to stay away.
	RetryAfter time.Duration
	// Reason is the node's sentence.
	Reason string
}

func (e *OverloadedError) Error() string { return "tidekv: " + e.Op + ": " + e.Reason }

// Is makes errors.Is(err, ErrOverloaded) hold.
func (e *OverloadedError) Is(target error) bool { return target == ErrOverloaded }

// Kind is OVERLOADED.
func (e *OverloadedError) Kind() kverr.Kind { return kverr.Overloaded }

// overloadedHere is the refusal the client gives itself for a node whose
// window of requests in flight is full (peerStats.throttled): the same
// status as the node's, so it is retried, failed over or returned the same
// way.
func overloadedHere(hint time.Duration) error {
	st, _ := status.New(codes.ResourceExhausted, fmt.Sprintf("node overloaded (refused by the client: it has as many requests in flight to the node as the node's refusals and round trips allow), retry after %v", hint)).
		WithDetails(&tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_OVERLOADED, RetryAfterMs: uint32(max(hint.Milliseconds(), 1))})
	return st.Err()
}
