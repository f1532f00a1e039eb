package kverr

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Kind is what an error asks its receiver to do; its values are the
// ErrorKind an ErrorDetail carries on the wire.
type Kind = tidekvpb.ErrorKind

// The kinds.
const (
	Unknown         = tidekvpb.ErrorKind_ERROR_UNKNOWN
	NotLeaseholder  = tidekvpb.ErrorKind_NOT_LEASEHOLDER
	RangeNotFound   = tidekvpb.ErrorKind_RANGE_NOT_FOUND
	KeyMismatch     = tidekvpb.ErrorKind_KEY_MISMATCH
	Ambiguous       = tidekvpb.ErrorKind_AMBIGUOUS
	Overloaded      = tidekvpb.ErrorKind_OVERLOADED
	InvalidArgument = tidekvpb.ErrorKind_INVALID_ARGUMENT
	Unavailable     = tidekvpb.ErrorKind_UNAVAILABLE
	StaleReplica    = tidekvpb.ErrorKind_STALE_REPLICA
	TxnRetry        = tidekvpb.ErrorKind_TXN_RETRY
	TxnCommitted    = tidekvpb.ErrorKind_TXN_ALREADY_COMMITTED
)

// Error is an error of a kind, with its sentence.
type Error struct {
	kind Kind
	msg  string
}

// New is an error of kind saying msg.
func New(kind Kind, msg string) *Error { return &Error{kind: kind, msg: msg} }

// Invalid is an INVALID_ARGUMENT error: a request refused as malformed or
// too large, in one sentence; nothing was done and retrying cannot help.
func Invalid(format string, args ...any) error {
	return New(InvalidArgument, fmt.Sprintf(format, args...))
}

func (e *Error) Error() string { return e.msg }

// Kind is e's kind.
func (e *Error) Kind() Kind { return e.kind }

// Is makes errors.Is(err, sentinel) hold for every error of the
// sentinel's kind; an error of kind Unknown is only itself.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && e.kind != Unknown && t.kind == e.kind
}

// The sentinels: test for them with errors.Is. Their sentences are the Go
// client's, which returns errors wrapping them.
var (
	// ErrNotFound: a read found no value for the key.
	ErrNotFound error = New(Unknown, "tidekv: key not found")
	// ErrAmbiguous: a non-idempotent write may or may not have been
	// applied.
	ErrAmbiguous error = New(Ambiguous, "tidekv: ambiguous result: the write may or may not have been applied")
	// ErrOverloaded: the node shed the request; nothing was done, retry
	// later.
	ErrOverloaded error = New(Overloaded, "tidekv: overloaded")
	// ErrUnavailable: no replica could serve the request; it was not
	// applied.
	ErrUnavailable error = New(Unavailable, "tidekv: unavailable")
	// ErrInvalidArgument: the request was refused as malformed or too
	// large; never retried.
	ErrInvalidArgument error = New(InvalidArgument, "tidekv: invalid argument")
	// ErrTxnRetry: a transaction cannot go on as it is; running it again
	// from the start may succeed.
	ErrTxnRetry error = New(TxnRetry, "tidekv: transaction must restart")
	// ErrTxnCommitted: a transaction's record is COMMITTED already, so it
	// cannot be aborted; final.
	ErrTxnCommitted error = New(TxnCommitted, "tidekv: transaction committed already")
)

// kinded is an error that says its kind.
type kinded interface{ Kind() Kind }

// KindOf is the kind of the first error in err's chain that has one
// (Unknown: none).
func KindOf(err error) Kind {
	var k kinded
	if errors.As(err, &k) {
		return k.Kind()
	}
	return Unknown
}

// NotLeaderError says this node holds a replica of the range but not its
// lease. LeaderNodeID is 0 when no leader is known.
type NotLeaderError struct {
	RangeID      uint64
	LeaderNodeID uint64
	Desc         *tidekvpb.RangeDescriptor
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("range %d: not leaseholder (leader node %d)", e.RangeID, e.LeaderNodeID)
}

// Kind is NOT_LEASEHOLDER.
func (e *NotLeaderError) Kind() Kind { return NotLeaseholder }

// RangeNotFoundError says no local replica covers the key or range.
type RangeNotFoundError struct {
	RangeID uint64
	Key     []byte
}

func (e *RangeNotFoundError) Error() string {
	if e.RangeID != 0 {
		return fmt.Sprintf("range %d not found on this node", e.RangeID)
	}
	return fmt.Sprintf("no local replica covers key %q", e.Key)
}

// Kind is RANGE_NOT_FOUND.
func (e *RangeNotFoundError) Kind() Kind { return RangeNotFound }

// KeyMismatchError says the key is outside the range the request reached,
// typically because a split happened meanwhile.
type KeyMismatchError struct {
	Key  []byte
	Desc *tidekvpb.RangeDescriptor
}

func (e *KeyMismatchError) Error() string {
	return fmt.Sprintf("key %q is outside range %d [%q, %q)", e.Key, e.Desc.GetRangeId(), e.Desc.GetStartKey(), e.Desc.GetEndKey())
}

// Kind is KEY_MISMATCH.
func (e *KeyMismatchError) Kind() Kind { return KeyMismatch }

// RangeBusyError says an admin operation was refused because another one
// held the range for longer than it would wait; nothing was done. It has
// no kind: a deliberate refusal that the client does not retry.
type RangeBusyError struct {
	RangeID uint64
	What    string
	Waited  time.Duration
}

func (e *RangeBusyError) Error() string {
	return fmt.Sprintf("range %d is busy with %s (waited %v); nothing was done, retry after it", e.RangeID, e.What, e.Waited)
}
