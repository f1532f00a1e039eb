package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// KV is the storage the RESP front end needs. It is defined here (by its
// consumer) so that the package depends on no server or client package;
// internal/redisgw adapts the TideKV Go client to it.
//
// Errors: implementations wrap ErrNotFound (Get only), ErrInvalidArgument,
// ErrOverloaded, ErrAmbiguous and ErrUnavailable so that errors.Is finds
// them. An invalid argument is reported to the Redis client as "ERR
// <message>", so its message should be ErrInvalidArgument's followed by the
// reason alone ("invalid argument: value of ... is too large ..."); the
// other sentinels get a fixed text, and any other error is "ERR <message>".
type KV interface {
	// Get returns the value of key or an error wrapping ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Put sets key to value.
	Put(ctx context.Context, key, value []byte) error
	// Delete removes key and reports whether it existed.
	Delete(ctx context.Context, key []byte) (existed bool, err error)
	// BatchGet reads keys; results are in the order of keys.
	BatchGet(ctx context.Context, keys [][]byte) ([]Result, error)
	// Write applies ops atomically. It may reject (ErrInvalidArgument) ops
	// whose keys span more than one range; MSET then runs as a Txn, the
	// other callers here fall back to one operation per key.
	Write(ctx context.Context, ops []Op) error
	// GuardedWrite applies ops atomically in one step under g and reports
	// what it found (see Guard). Like Write, it may reject ops whose keys
	// span more than one range (ErrInvalidArgument).
	GuardedWrite(ctx context.Context, ops []Op, g Guard) (GuardResult, error)
	// CompareAndSet sets key to *newValue (deletes it if newValue is nil),
	// with the expiry e, if its current state matches expected (nil:
	// absent). It returns whether it swapped and the state before the
	// operation.
	CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e Expiry) (swapped bool, current []byte, currentExists bool, err error)
	// Scan returns pairs with keys in [start, end) in key order, at most
	// limit of them (limit <= 0: no limit). An empty end means no bound.
	Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error)
	// WriteEach applies each op on its own, as Put or Delete would, and
	// returns one result per op, in order; Existed is reported for deletes
	// and SetTTL ops.
	// Ops on one key take effect in their order, so a delete's Existed
	// sees an earlier put. The ops
	// are not atomic together: an implementation may apply the ops of one
	// range in one atomic write, and an op that fails (an invalid value,
	// say) fails alone. It is how a pipeline's writes share a proposal.
	WriteEach(ctx context.Context, ops []Op) []OpResult
	// Txn runs fn in one serializable transaction and commits what fn
	// wrote through tx if fn returns nil; an error from fn rolls it back
	// and is returned. Conflicts are retried inside: fn may run again, from
	// the start, on a new tx, so it must not keep effects of an attempt
	// that failed. A KV that cannot run transactions (a key space whose
	// puts carry a TTL) returns ErrInvalidArgument without calling fn.
	Txn(ctx context.Context, fn func(tx TxnKV) error) error
}

// Incrementer is a KV that adds to a counter in one step of the store
// (INCR and its kin): concurrent increments of one key are ordered by the
// store and never conflict, where KV.CompareAndSet rounds lose to each
// other and are sent again. A KV without it gets a compare-and-set loop.
type Incrementer interface {
	// Increment adds by to key's value, a decimal int64 in canonical form
	// (absent: 0), and writes the sum with the expiry e, atomically.
	// applied is false, and nothing is written, when the value is not such
	// an integer or the sum overflows; before is the value before either
	// way. An error wrapping errors.ErrUnsupported: the store cannot yet
	// (a node still runs an older binary), and nothing was sent.
	Increment(ctx context.Context, key []byte, by int64, e Expiry) (applied bool, before []byte, beforeExists bool, err error)
}

// SetPositioner is a KV that says whether the collection layouts an
// older TideKV's Redis front end breaks or misreads may be written: a
// set's member positions (sets.go), which its SADD and SREM would leave
// out of step, and a sorted set's start hint (zsetkeys.go), which makes
// the metadata a string to it; and streams (stream.go), which it does
// not serve, so no stream is created (XADD, RESTORE) before.
// Until SetPositions is true (every node's
// binary keeps them) sets are created without positions and no start
// hint is set, so what is written is what an older front end writes; a
// set numbered or a hint set already is kept as it is, for only a cluster
// where SetPositions was true could have written it. A KV without it gets
// the older layouts.
type SetPositioner interface {
	SetPositions() bool
}

// TxnKV is one attempt of a KV.Txn. Reads see the transaction's own
// earlier writes. A put clears the key's TTL or sets a new one; to keep
// the current one, a put states the Expiry its read gave (txView does).
type TxnKV interface {
	// Get reads key, with its Version and Expiry (no TTL); an absent key
	// is Found false, not an error.
	Get(ctx context.Context, key []byte) (Result, error)
	// BatchGet reads keys as Get reads each, in one call (one round trip
	// to the transaction's coordinator): results in the order of keys.
	BatchGet(ctx context.Context, keys [][]byte) ([]Result, error)
	Put(ctx context.Context, key, value []byte) error
	// PutExpiring is Put with e's TTL or time (e.Keep is refused).
	PutExpiring(ctx context.Context, key, value []byte, e Expiry) error
	Delete(ctx context.Context, key []byte) error
	// Scan is KV.Scan inside the transaction: it sees the transaction's
	// writes, and the commit fails (and retries) if a key of the span as
	// far as it was read changed before it.
	Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error)
}

// OpResult is one op's outcome of a WriteEach: for a delete, whether its
// key held a value; or why the op failed.
type OpResult struct {
	Existed bool
	Err     error
}

// Result is one key's outcome of a BatchGet.
type Result struct {
	Value []byte
	Found bool
	// TTL is the value's remaining time to live; 0: it does not expire.
	TTL time.Duration
	// Version identifies the key's newest version, live or not (a
	// delete, an expired value): a key written again, even with the same
	// value, has another. Zero: unknown (no version, an unversioned range,
	// a KV that does not tell).
	Version Version
	// Expiry is set by TxnKV.Get instead of TTL: the value's expiry as a
	// write states it, so that a put can keep it (KEEPTTL, INCR): At for
	// a stored value; the transaction's own put's TTL (from the commit)
	// or At; none: it does not expire.
	Expiry Expiry
}

// Version is a version's timestamp as TideKV's HLC has it; only compared.
type Version struct {
	WallTime int64
	Logical  uint32
}

// Op is one operation of a Write: a put of Value, or a delete, or a change
// of the key's TTL.
type Op struct {
	Key, Value []byte
	Delete     bool
	// SetTTL: not a put; if the key holds a value, its expiry becomes
	// Expiry's (none: removed) and the value stays.
	SetTTL bool
	// Expiry is a put's (Put, MSET: none, which clears a TTL).
	Expiry Expiry
}

// Expiry says what a write does with its key's time to live. Values
// expire at a time the store fixes when it orders the write, the same for
// every reader. At most one field is set; none: the value does not expire,
// and a TTL the key had is cleared.
type Expiry struct {
	// TTL > 0: the value expires TTL after the write (whole
	// milliseconds).
	TTL time.Duration
	// At: the value expires at this time (whole milliseconds); one
	// already past leaves the key absent.
	At time.Time
	// Keep: keep the TTL of the key's current value (KEEPTTL, INCR, HSET).
	Keep bool
}

// Guard makes a write conditional: it applies only if Key is absent or
// holds Value, and when Key is absent every key in [ClearStart, ClearEnd)
// is deleted first. It is how a hash is created or updated in one step:
// Key is the hash's marker, the span its fields.
type Guard struct {
	Key, Value           []byte
	ClearStart, ClearEnd []byte
}

// absentGuard holds while key k does not exist: its value, zsetMarker
// alone, is never stored (zsetkeys.go), so k holding anything fails it.
func absentGuard(k []byte) Guard { return Guard{Key: encKey(k), Value: zsetMarker} }

// GuardResult is what a guarded write found.
type GuardResult struct {
	// Failed: Key held another value (a hash command on a string), and
	// nothing was written.
	Failed bool
	// Existed says, per op, whether its key held a value before the write.
	Existed []bool
}

// KeyValue is one key and its value.
type KeyValue struct{ Key, Value []byte }

// Errors a KV implementation wraps.
var (
	ErrNotFound        = errors.New("key not found")
	ErrInvalidArgument = errors.New("invalid argument")
	ErrOverloaded      = errors.New("overloaded")
	ErrAmbiguous       = errors.New("ambiguous result: the write may or may not have been applied")
	// ErrUnordered: the KV keeps no key order (a hashed key space), so it
	// cannot scan; it holds no hashes either (GuardedWrite is refused).
	ErrUnordered   = errors.New("unordered")
	ErrUnavailable = errors.New("unavailable: no replica could serve the command, retry")
)

// OverloadedError is ErrOverloaded with the node's hint of when to retry.
// Every ErrOverloaded is answered "TRYAGAIN overloaded, retry after N ms",
// an error Redis client libraries retry (docs/admission.md): N is the
// hint, or DefaultRetryAfter without one.
type OverloadedError struct{ RetryAfter time.Duration }

// DefaultRetryAfter is the retry hint of an overload refusal that gives
// none.
const DefaultRetryAfter = 20 * time.Millisecond

func (e *OverloadedError) Error() string {
	return fmt.Sprintf("overloaded, retry after %v", e.RetryAfter)
}

// Is makes errors.Is(err, ErrOverloaded) hold.
func (e *OverloadedError) Is(target error) bool { return target == ErrOverloaded }

// Key encoding (see doc.go).

// hashMarker is the value stored at a hash's own key.
var hashMarker = []byte("\xffTideKV:hash\x00\x01\xfe")

func isHash(v []byte) bool { return bytes.Equal(v, hashMarker) }

// isMarker reports whether v is the value at a hash's, list's, set's or sorted set's
// own key (collection.go): anything starting with typePrefix, which
// string values may not, so that a string is never mistaken for another
// type.
func isMarker(v []byte) bool { return bytes.HasPrefix(v, typePrefix) }

// encKey escapes a user key (the result may be k itself: never write
// into it): every 0x00 becomes 0x00 0xFF. The escaping
// preserves order, and an escaped key never contains 0x00 followed by
// anything but 0xFF.
func encKey(k []byte) []byte {
	n := bytes.Count(k, []byte{0})
	if n == 0 {
		// k itself: keys are the command's own copies (prepare), and
		// capped so that an append (fieldKey) copies.
		return k[:len(k):len(k)]
	}
	out := make([]byte, 0, len(k)+n)
	for _, b := range k {
		out = append(out, b)
		if b == 0 {
			out = append(out, 0xff)
		}
	}
	return out
}

// fieldPrefix is the prefix of every field key of hash h: enc(h) 0x00 0x01.
func fieldPrefix(h []byte) []byte { return append(encKey(h), 0x00, 0x01) }

// fieldsEnd is the exclusive end of hash h's fields: enc(h) 0x00 0x02.
func fieldsEnd(h []byte) []byte { return append(encKey(h), 0x00, 0x02) }

// fieldKey is the engine key of field f of hash h.
func fieldKey(h, f []byte) []byte { return append(fieldPrefix(h), f...) }

// decodeKey splits a stored key. For a field key it returns the hash key,
// the field and isField; otherwise the user key. Keys written by other
// clients that contain a 0x00 not followed by 0xFF or 0x01 are returned as
// they are.
func decodeKey(k []byte) (user, field []byte, isField bool) {
	if bytes.IndexByte(k, 0) < 0 {
		return k, nil, false
	}
	out := make([]byte, 0, len(k))
	for i := 0; i < len(k); i++ {
		b := k[i]
		if b == 0 && i+1 < len(k) {
			switch k[i+1] {
			case 0xff:
				out = append(out, 0)
				i++
				continue
			case 0x01:
				return out, k[i+2:], true
			}
		}
		out = append(out, b)
	}
	return out, nil, false
}
