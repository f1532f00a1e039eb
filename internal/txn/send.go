package txn

import (
	"context"
	"errors"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Sender sends a transaction's reads and steps to the ranges that hold
// their keys, wherever they are led. The coordinator owns this interface:
// the node's routing satisfies it (internal/txnclient over the SDK's
// client), and tests with a fake. Its errors carry the kinds below
// (ErrRetry, ErrCommitted, ErrNotOneRange, *UncertainReadError) where they
// apply, so that the coordinator decides on kinds, not on one sender's
// types; they may wrap the sender's own errors too, which the node's edge
// answers by.
type Sender interface {
	// Get reads key as at says, its version included.
	Get(ctx context.Context, key []byte, at ReadAt) (Value, error)
	// Scan reads up to limit keys (0: all) of [start, end) as at says.
	Scan(ctx context.Context, start, end []byte, limit int, at ReadAt) ([]KeyValue, error)
	// RefreshReads and RefreshSpans check that nothing transaction txnID
	// read changed in (from, to] (ErrRetry if something did) and record
	// the reads at to.
	RefreshReads(ctx context.Context, txnID []byte, keys [][]byte, from, to hlc.Timestamp) error
	RefreshSpans(ctx context.Context, txnID []byte, spans []*tidekvpb.KeySpan, from, to hlc.Timestamp) error
	// CommitOnePhase commits a transaction whose reads and writes lie in
	// one range in one Raft command (ErrNotOneRange, nothing written,
	// when they do not).
	CommitOnePhase(ctx context.Context, txnID []byte, readTS hlc.Timestamp, reads [][]byte, scans []*tidekvpb.KeySpan, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error)
	// WriteIntents writes ops as txn's intents at writeTS or above, and
	// returns the highest timestamp one was written at.
	WriteIntents(ctx context.Context, txn *tidekvpb.TxnKey, writeTS hlc.Timestamp, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error)
	// TxnRecord runs one operation on a transaction's record.
	TxnRecord(ctx context.Context, req *tidekvpb.TxnRecordRequest) (*tidekvpb.TxnRecordResponse, error)
	// ResolveIntents turns txn's intents at keys into values at commitTS
	// (commit) or removes them.
	ResolveIntents(ctx context.Context, txn *tidekvpb.TxnKey, keys [][]byte, commit bool, commitTS hlc.Timestamp) error
}

// ReadAt is how a transaction reads: at Timestamp, as transaction Txn (its
// own intents are no obstacle), with versions up to Limit uncertain.
type ReadAt struct {
	Timestamp, Limit hlc.Timestamp
	Txn              []byte
}

// Value is what a Get found.
type Value struct {
	Value []byte
	Found bool
	// TTL is the value's remaining time to live at the read (0: none).
	TTL time.Duration
	// Version is the timestamp of the key's newest version (zero: none).
	Version hlc.Timestamp
}

// KeyValue is one key a Scan found.
type KeyValue struct{ Key, Value []byte }

// Store is what the coordinator needs of the node's replication layer
// (*raftstore.Store satisfies it).
type Store interface {
	HLC() *hlc.Clock
	LogVersion() uint32
	CommitWait(ctx context.Context, ts hlc.Timestamp)
}

// Node is the node's checks the coordinator applies to what clients send
// it, so that a transaction is refused as a plain request would be.
type Node struct {
	// NeedTxnVersion refuses transactions before the cluster runs them.
	NeedTxnVersion func() error
	// CheckKey, CheckTxnOps and CheckKeySpace apply the node's limits and
	// the key space's.
	CheckKey      func(key []byte) error
	CheckTxnOps   func(ops []*tidekvpb.WriteOp) error
	CheckKeySpace func(ctx context.Context, name string, keys ...[]byte) error
	// User is the user the caller called as ("" on an insecure node).
	User func(ctx context.Context) (string, error)
}

var (
	// ErrRetry: the transaction cannot go on as it is; running it again
	// from the start may succeed. The node answers it TXN_RETRY.
	ErrRetry = errors.New("transaction must restart")
	// ErrCommitted: the transaction's record is COMMITTED already.
	ErrCommitted = errors.New("transaction committed already")
	// ErrNotOneRange: a one-phase commit's keys span more than one range.
	ErrNotOneRange = errors.New("a one-phase commit's keys span more than one range")
)

// UncertainReadError: a read found a committed version at Timestamp, above
// its read timestamp and within its uncertainty window. It is ErrRetry,
// and Err (the sender's own error, if any).
type UncertainReadError struct {
	Timestamp hlc.Timestamp
	Err       error
}

func (e *UncertainReadError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return ErrRetry.Error() + ": a read found a version in its uncertainty window"
}

func (e *UncertainReadError) Unwrap() []error { return []error{e.Err, ErrRetry} }

// Mark makes err, a sender's error, also of kind (one of this package's
// errors), keeping its text and what it wraps.
func Mark(err, kind error) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, kind: kind}
}

type marked struct{ err, kind error }

func (e *marked) Error() string   { return e.err.Error() }
func (e *marked) Unwrap() []error { return []error{e.err, e.kind} }

// retryError is a TXN_RETRY the coordinator makes itself.
type retryError struct{ msg string }

func (e *retryError) Error() string        { return e.msg }
func (e *retryError) Is(target error) bool { return target == ErrRetry }

// invalidError is a request the coordinator refuses as malformed: of
// kverr's INVALID_ARGUMENT, which the node answers with this text. (It
// matched only the store's ErrInvalidRequest, so the node's classify took
// it for UNAVAILABLE and the client retried it.)
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Is(target error) bool {
	t, ok := target.(*kverr.Error)
	return ok && t.Kind() == kverr.InvalidArgument
}
