package raftstore

import (
	"context"
	"fmt"

	"github.com/tidekv/tidekv/internal/hlc"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
)

// ReadChangedError: a key a transaction read at its read timestamp has a
// committed version above it and at or below the timestamp the
// transaction commits at, so what it read is no longer what is there at
// its commit: it restarts.
type ReadChangedError struct {
	RangeID uint64
	Key     []byte
	At      hlc.Timestamp
}

func (e *ReadChangedError) Error() string {
	return fmt.Sprintf("key %q of range %d, read by the transaction, was written at %s, after its read: restart the transaction", e.Key, e.RangeID, e.At)
}

// RefreshReads moves a transaction's reads of ks from its read timestamp
// from up to to, its commit timestamp (docs/transactions.md "Reads are
// validated, not locked"): it fails when another transaction committed a
// version of one in (from, to] (*ReadChangedError) or holds an intent at
// or below to (*IntentError). It reads at to on the leaseholder, which
// records to in the timestamp cache, so no write lands below to later.
// The transaction's own intent (txn, its ID) is looked through.
func (r *Replica) RefreshReads(ctx context.Context, ks [][]byte, from, to hlc.Timestamp, txn []byte) error {
	if err := r.checkKey(ks...); err != nil {
		return err
	}
	if !from.Less(to) {
		return fmt.Errorf("%w: a refresh moves reads from a timestamp to a later one, got %s and %s", ErrInvalidRequest, from, to)
	}
	spans := make([]keySpan, len(ks))
	for i, k := range ks {
		spans[i] = pointSpan(k)
	}
	if err := r.checkRead(ctx, ReadOptions{Timestamp: to}, spans...); err != nil {
		return err
	}
	if err := r.checkGCThreshold(from); err != nil {
		return err
	}
	if !r.VersionedLayout() {
		return fmt.Errorf("%w: range %d is not on the versioned layout, which transactions need: retry", ErrLogVersion, r.rangeID)
	}
	snap := r.store.eng.NewSnapshot()
	defer snap.Close()
	for _, k := range ks {
		vk := keys.VersionedKey(k)
		ver, err := mvcc.Get(snap, vk, to)
		if err == nil && ver.Txn != nil {
			if err = r.foreignIntent(k, ver, txn); err == nil {
				ver, err = mvcc.Get(snap, vk, prev(ver.Timestamp)) // below our own intent
			}
		}
		if err != nil {
			return err
		}
		if from.Less(ver.Timestamp) {
			return &ReadChangedError{RangeID: r.rangeID, Key: k, At: ver.Timestamp}
		}
	}
	return r.checkGCThreshold(from)
}
