package raftstore

import (
	"errors"
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Uncertainty (docs/transactions.md, "Uncertainty"): a transaction reads
// at a timestamp from its coordinator's clock, which may lag the clock
// that stamped a write acknowledged before the transaction began by up to
// the maximum offset. So a read that carries an uncertainty limit does not
// take a committed version between its timestamp and the limit for one
// written after it: it fails, and the reader moves above that version.

// UncertainReadError: a read at Read found a committed version of Key at
// Found, above Read and at or below its uncertainty limit. The reader
// cannot tell whether that write came before it in real time, so it must
// read again at Found or later.
type UncertainReadError struct {
	RangeID uint64
	Key     []byte
	Read    hlc.Timestamp
	Found   hlc.Timestamp
}

func (e *UncertainReadError) Error() string {
	return fmt.Sprintf("key %q of range %d has a version at %s, within the uncertainty window above the read at %s (the writer's clock may be ahead of the reader's): read again above it",
		e.Key, e.RangeID, e.Found, e.Read)
}

// uncertain reports whether a read at ro has an uncertainty window.
func (ro ReadOptions) uncertain() bool {
	return !ro.Timestamp.IsZero() && ro.Timestamp.Less(ro.UncertaintyLimit)
}

// checkUncertainPoint fails a read of key (vk its versioned key) at ro
// that has a version in its uncertainty window: *UncertainReadError for a
// committed one, *IntentError for another transaction's intent.
func (r *Replica) checkUncertainPoint(rd storage.Reader, vk, key []byte, ro ReadOptions) error {
	if !ro.uncertain() {
		return nil
	}
	ver, err := mvcc.Get(rd, vk, ro.UncertaintyLimit)
	if err != nil || !ro.Timestamp.Less(ver.Timestamp) {
		return err
	}
	if ver.Txn != nil {
		return r.foreignIntent(key, ver, ro.Txn)
	}
	return &UncertainReadError{RangeID: r.rangeID, Key: append([]byte(nil), key...), Read: ro.Timestamp, Found: ver.Timestamp}
}

// checkUncertainSpan is checkUncertainPoint for the versioned span
// [lo, hi) a scan read through.
func (r *Replica) checkUncertainSpan(lo, hi []byte, ro ReadOptions) error {
	if !ro.uncertain() {
		return nil
	}
	k, at, err := mvcc.FirstChange(r.store.eng, lo, hi, ro.Timestamp, ro.UncertaintyLimit, mvcc.ChangeOptions{})
	var ie *mvcc.IntentError
	if errors.As(err, &ie) {
		return r.foreignIntent(keys.UserKey(ie.Key), mvcc.Version{Timestamp: ie.Timestamp, Txn: ie.Txn}, ro.Txn)
	}
	if err != nil || k == nil {
		return err
	}
	return &UncertainReadError{RangeID: r.rangeID, Key: keys.UserKey(k), Read: ro.Timestamp, Found: at}
}
