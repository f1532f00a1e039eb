package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// ReadChangedError: a key a transaction read at its read timestamp has a
// committed version above it and at or below the timestamp the
// transaction commits at, or its value expired in between (At is then the
// expiry), so what it read is no longer what is there at its commit: it
// restarts.
type ReadChangedError struct {
	RangeID uint64
	Key     []byte
	At      hlc.Timestamp
}

func (e *ReadChangedError) Error() string {
	return fmt.Sprintf("key %q of range %d, read by the transaction, changed at %s (written, or its value expired), after its read: restart the transaction", e.Key, e.RangeID, e.At)
}

// RefreshReads moves a transaction's reads of ks from its read timestamp
// from up to to, its commit timestamp (docs/transactions.md "Reads are
// validated, not locked"): it fails when another transaction committed a
// version of one in (from, to] or the value read at from expired at or
// before to (*ReadChangedError), or holds an intent at or below to
// (*IntentError). It reads at to on the leaseholder, which
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
	snap, err := r.versionedSnapshot(ctx)
	if err != nil {
		return err
	}
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
		if ver.ExpiredWithin(from, to) {
			return &ReadChangedError{RangeID: r.rangeID, Key: k, At: hlc.Timestamp{WallTime: ver.ExpiresAt}}
		}
	}
	return r.checkGCThreshold(from)
}

// RefreshSpan is RefreshReads for a span a transaction (txn, its ID)
// scanned: the part of [start, end) in this range (empty end: no bound)
// must hold no version in (from, to], no new key, no deleted one, no value
// expired in between, and no intent at or below to but the transaction's
// own, which is looked through. It returns where the rest of the span
// starts when the range ends before it (nil: done).
func (r *Replica) RefreshSpan(ctx context.Context, start, end []byte, from, to hlc.Timestamp, txn []byte) (resume []byte, err error) {
	if err := r.checkKey(start); err != nil {
		return nil, err
	}
	if !from.Less(to) {
		return nil, fmt.Errorf("%w: a refresh moves reads from a timestamp to a later one, got %s and %s", ErrInvalidRequest, from, to)
	}
	upper := end
	if d := r.desc.Load(); len(d.GetEndKey()) > 0 && (len(end) == 0 || bytes.Compare(d.GetEndKey(), end) < 0) {
		upper, resume = d.GetEndKey(), append([]byte(nil), d.GetEndKey()...)
	}
	if err := r.checkRead(ctx, ReadOptions{Timestamp: to}, keySpan{start: start, end: upper}); err != nil {
		return nil, err
	}
	if err := r.checkGCThreshold(from); err != nil {
		return nil, err
	}
	snap, err := r.versionedSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	own := func(intent []byte) bool { return r.foreignIntent(nil, mvcc.Version{Txn: intent}, txn) == nil }
	o := mvcc.ChangeOptions{Own: own, Expiry: true}
	if err := r.spanChanged(snap, &tidekvpb.KeySpan{StartKey: start, EndKey: upper}, from, to, o); err != nil {
		return nil, err
	}
	return resume, r.checkGCThreshold(from)
}

// versionedSnapshot pins the engine for a refresh (layoutSnapshot): one
// taken after the replica was destroyed would find no version in the
// cleared span, and the refresh would pass.
func (r *Replica) versionedSnapshot(ctx context.Context) (storage.Snapshot, error) {
	lv, snap, err := r.layoutSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	if !lv.mvcc {
		snap.Close()
		return nil, fmt.Errorf("%w: range %d is not on the versioned layout, which transactions need: retry", ErrLogVersion, r.rangeID)
	}
	return snap, nil
}

// spanChanged is why a scan of sp at from is not what a read at to sees,
// if it is not: a key that changed in (from, to] as o counts changes
// (*ReadChangedError), or an intent at or below to (*IntentError).
func (r *Replica) spanChanged(rd storage.Reader, sp *tidekvpb.KeySpan, from, to hlc.Timestamp, o mvcc.ChangeOptions) error {
	lo, hi := keys.VersionedSpan(sp.GetStartKey(), sp.GetEndKey())
	k, at, err := mvcc.FirstChange(rd, lo, hi, from, to, o)
	var ie *mvcc.IntentError
	switch {
	case errors.As(err, &ie):
		return r.foreignIntent(keys.UserKey(ie.Key), mvcc.Version{Timestamp: ie.Timestamp, Txn: ie.Txn}, nil)
	case err != nil:
		return err
	case k != nil:
		return &ReadChangedError{RangeID: r.rangeID, Key: keys.UserKey(k), At: at}
	}
	return nil
}
