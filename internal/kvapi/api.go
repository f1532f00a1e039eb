package kvapi

import (
	"context"
	"errors"
	"time"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Node is what the API needs of the node it runs on. Methods that take
// keys take the first one apart (key, more...), so that a single-key
// request passes no slice through the interface (it would be allocated).
type Node interface {
	// Lookup is the local replica covering key, or nil.
	Lookup(key []byte) *raftstore.Replica
	// Admit admits a request (a read or not); on nil, Done(p) follows
	// when the request ends.
	Admit(ctx context.Context, read bool) (admission.Priority, error)
	Done(p admission.Priority)
	// AdmitGrowth waits until r's range has room for grow more bytes at
	// key; it returns the replica key now belongs to and the release.
	AdmitGrowth(ctx context.Context, r *raftstore.Replica, key []byte, grow uint64) (*raftstore.Replica, func(), error)
	// IntentWait is one request's budget for waiting past intents.
	IntentWait(op string) IntentWait
	// Refused counts a request of op refused before it reached a replica;
	// Served one that ran on key's replica.
	Refused(op string, start time.Time, err error)
	Served(op string, key []byte, start time.Time, err error)
	// CheckKeySpace checks that the keys belong to the key space name
	// ("": the default).
	CheckKeySpace(ctx context.Context, name string, key []byte, more ...[]byte) error
	// ScanEnd checks a scan's bounds against its key space and returns
	// where it ends.
	ScanEnd(ctx context.Context, name string, start, end []byte, hashOrder bool) ([]byte, error)
	// Touch notes the keys' use (eviction); NoteWrite a write's origin
	// (leases follow writers); CountRead a read's hit or miss.
	Touch(r *raftstore.Replica, key []byte, more ...[]byte)
	NoteWrite(ctx context.Context, r *raftstore.Replica)
	CountRead(key []byte, found bool)
	// ReadThrough is v, or for a miss in a key space with a miss handler
	// what the handler answers.
	ReadThrough(ctx context.Context, r *raftstore.Replica, key []byte, v raftstore.Value) (raftstore.Value, error)
	// NeedVersion refuses a request that needs Raft log version v (what
	// names it) before every node runs it.
	NeedVersion(v uint32, what string) error
	// TxnExpiry is how long a transaction's record may go without a
	// heartbeat before a push aborts it.
	TxnExpiry() time.Duration
}

// IntentWait clears the way past one intent: nil when the request may run
// again, a TXN_RETRY error once the wait is over.
type IntentWait interface {
	Resolve(ctx context.Context, ie *raftstore.IntentError) error
}

// Limits bound what a single request may carry; a request over one is
// refused with kverr.ErrInvalidArgument naming it, and changes nothing.
type Limits struct {
	MaxKeySize, MaxValueSize    int
	MaxScanLimit, MaxScanBytes  int
	MaxBatchKeys, MaxWriteBytes int
}

// API serves KV requests from a node's replicas.
type API struct {
	node   Node
	limits Limits
}

// New is the API of node, under limits.
func New(node Node, limits Limits) *API { return &API{node: node, limits: limits} }

// Options are what a call says besides its keys and values.
type Options struct {
	// KeySpace names the key space of the keys ("": the default).
	KeySpace string
	// Read is how a read reads (CheckRead).
	Read raftstore.ReadOptions
	// TTL > 0: a put's value expires TTL after the write (whole
	// milliseconds).
	TTL time.Duration
	// Replica is the replica the caller found for the (first) key, or nil:
	// the call looks it up.
	Replica *raftstore.Replica
}

// readOps are the operations counted as reads in a range's load.
var readOps = map[string]bool{"get": true, "scan": true, "batch_get": true}

// Run runs one request of op: validation, admission, routing, the wait
// for room under the range's size limit (grow: the most bytes it may
// store), fn on the replica, again past intents, metrics. r is the
// replica the caller found for key, or nil. Its errors are kverr's (or
// the replica's, which speak kverr); a gRPC service converts them at its
// edge.
func Run[T any](ctx context.Context, a *API, op string, validate func() error, key []byte, grow uint64, r *raftstore.Replica, fn func(*raftstore.Replica) (T, error)) (T, error) {
	var zero T
	n := a.node
	start := time.Now()
	if err := validate(); err != nil {
		n.Refused(op, start, err)
		return zero, err
	}
	pri, err := n.Admit(ctx, readOps[op])
	if err != nil {
		n.Refused(op, start, err)
		return zero, err
	}
	defer n.Done(pri)
	if r == nil {
		if r = n.Lookup(key); r == nil {
			err = &kverr.RangeNotFoundError{Key: key}
		}
	}
	if err == nil {
		var done func()
		if r, done, err = n.AdmitGrowth(ctx, r, key, grow); err == nil {
			defer done()
		}
	}
	if err != nil {
		n.Refused(op, start, err)
		return zero, err
	}
	r.CountRequest(key)
	if readOps[op] {
		r.CountRead()
	}
	v, err := fn(r)
	if err != nil {
		v, err = pastIntents(ctx, n, op, v, err, func() (T, error) { return fn(r) })
	}
	n.Served(op, key, start, err)
	return v, err
}

// pastIntents takes fn's first result (v, err) and runs fn again each
// time it met an intent that the node's wait clears, until it succeeds,
// fails otherwise, or the wait for a request of kind op is over.
func pastIntents[T any](ctx context.Context, n Node, op string, v T, err error, fn func() (T, error)) (T, error) {
	var w IntentWait
	for {
		var ie *raftstore.IntentError
		if !errors.As(err, &ie) {
			return v, err
		}
		if w == nil {
			w = n.IntentWait(op)
		}
		if err := w.Resolve(ctx, ie); err != nil {
			return v, err
		}
		v, err = fn()
	}
}

// CheckKey refuses an empty key or one over the size limit.
func (a *API) CheckKey(k []byte) error {
	if len(k) == 0 {
		return kverr.Invalid("empty key")
	}
	if len(k) > a.limits.MaxKeySize {
		return kverr.Invalid("key of %d bytes is too large (the maximum key size is %d bytes)", len(k), a.limits.MaxKeySize)
	}
	return nil
}

// CheckValue refuses a value over the size limit.
func (a *API) CheckValue(v []byte) error {
	if len(v) > a.limits.MaxValueSize {
		return kverr.Invalid("value of %d bytes is too large (the maximum value size is %d bytes)", len(v), a.limits.MaxValueSize)
	}
	return nil
}

// CheckRead validates a read's mode and staleness bound.
func CheckRead(ro raftstore.ReadOptions) error {
	switch ro.Mode {
	case tidekvpb.ReadMode_LINEARIZABLE, tidekvpb.ReadMode_ANY:
	case tidekvpb.ReadMode_BOUNDED:
		if ro.MaxStaleness == 0 && ro.Timestamp.IsZero() {
			return kverr.Invalid("a bounded read needs max_staleness_ms > 0")
		}
	default:
		return kverr.Invalid("unknown read mode %d", ro.Mode)
	}
	return nil
}

// versionOverhead bounds what a version stores beyond its user key and
// value, in either layout: the engine key's prefix, escapes beyond the
// key's own length (counted apart), terminator and timestamp, and the
// value's header.
const versionOverhead = 48

// Growth bounds the bytes writing ops stores in a range: each op a
// version (a put's value, a delete's tombstone) whose key may double when
// escaped, and for a transaction's intents (txn: its ID and anchor) the
// transaction each intent names.
func Growth(txn *tidekvpb.TxnKey, ops ...*tidekvpb.WriteOp) uint64 {
	var n uint64
	for _, op := range ops {
		n += uint64(2*len(op.GetKey())+len(op.GetValue())) + versionOverhead
		if txn != nil {
			n += uint64(len(txn.GetId()) + len(txn.GetAnchor()))
		}
	}
	return n
}

// RecordGrowth bounds what a transaction's record stores: its key (the
// escaped anchor and the ID) and the record (the ID, the anchor, a status
// and two timestamps).
func RecordGrowth(txn *tidekvpb.TxnKey) uint64 {
	return uint64(3*len(txn.GetAnchor())+2*len(txn.GetId())) + 2*versionOverhead
}
