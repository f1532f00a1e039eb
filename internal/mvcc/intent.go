package mvcc

import (
	"bytes"
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Transactions (docs/transactions.md "Transactions") store two things here:
//
//   - Intents: a transaction's provisional write is a version of its key at
//     the transaction's write timestamp whose value header carries the
//     transaction (flag bit 1, value.go: its ID and where its record is,
//     encoded by the caller; this package only compares the bytes). Get returns it like any
//     version, with Version.Txn set, and the caller decides what it means;
//     Scan refuses to step over one (IntentError), since it cannot tell
//     whether the value is there; GC keeps every version of a key whose
//     newest version at the safe point is an intent, since resolving it may
//     remove it and uncover the one below.
//   - Records: a transaction's record is an opaque value under RecordKey,
//     beside the versions of its anchor key: escape(anchor) 0x00 0x00 ID.
//     Version keys hold 0x00 only before 0xFF (an escaped zero) or 0x01
//     (the terminator), so 0x00 0x00 sorts a key's records after every
//     smaller key's versions and before its own: records lie in the span
//     of their anchor, and a range's span, split, merge or snapshot carries
//     them with its versions. Readers of versions skip them.

const recordMark = 0x00 // after escape(anchor) 0x00: a record, not a version

// IntentError: a scan met a transaction's intent at or below its timestamp
// and cannot say whether the key has a value.
type IntentError struct {
	Key       []byte // the user key
	Txn       []byte // the intent's transaction
	Timestamp hlc.Timestamp
}

func (e *IntentError) Error() string {
	return fmt.Sprintf("key %q holds an intent of transaction %x at %s", e.Key, e.Txn, e.Timestamp)
}

// PutIntent writes transaction txn's intent (txn: non-empty) to set key to
// value at ts, expiring at expiresAt (as PutExpiring; 0: never).
func PutIntent(w storage.Writer, key []byte, ts hlc.Timestamp, value []byte, expiresAt int64, txn []byte) error {
	if err := checkTxnID(txn); err != nil {
		return err
	}
	return write(w, key, ts, value, expiresAt, false, txn)
}

// DeleteIntent writes transaction txn's intent to delete key at ts.
func DeleteIntent(w storage.Writer, key []byte, ts hlc.Timestamp, txn []byte) error {
	if err := checkTxnID(txn); err != nil {
		return err
	}
	return write(w, key, ts, nil, 0, true, txn)
}

func checkTxnID(txn []byte) error {
	if len(txn) == 0 {
		return fmt.Errorf("%w: an intent needs its transaction", ErrInvalidArgument)
	}
	return nil
}

// ClearVersion removes key's version at ts, if any: how an intent is taken
// back (aborted) or moved (committed at another timestamp).
func ClearVersion(w storage.Writer, key []byte, ts hlc.Timestamp) error {
	return w.Delete(AppendKey(nil, key, ts))
}

// RecordKey is the engine key of transaction txn's record, anchored at key.
func RecordKey(key, txn []byte) []byte {
	return append(recordsStart(key), txn...)
}

// IsRecordKey reports whether ek is a transaction record's key.
func IsRecordKey(ek []byte) bool {
	_, ok := recordAnchorEnd(ek)
	return ok
}

// recordAnchorEnd reports whether ek is a record's key and, if so, returns
// the seek key past its anchor's records (the anchor's first version).
func recordAnchorEnd(ek []byte) ([]byte, bool) {
	for rest, off := ek, 0; ; {
		i := bytes.IndexByte(rest, escapeByte)
		if i < 0 || i+1 == len(rest) {
			return nil, false
		}
		switch rest[i+1] {
		case recordMark:
			return append(ek[:off+i+1:off+i+1], terminator), true
		case escapedZero:
			rest, off = rest[i+2:], off+i+2
		default:
			return nil, false
		}
	}
}
