package raftstore

import (
	"bytes"

	"context"
	"errors"
	"fmt"
	"google.golang.org/protobuf/proto"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Transactions on a replica (docs/transactions.md step 5): the leaseholder
// proposes TxnCommands, which txnapply.go evaluates at apply. Each needs
// log version 7 on every node: an older binary would apply one as an empty
// write.

// IntentError: a key holds another transaction's intent, so a read cannot
// say what its value is and a write must not overwrite it. Whoever meets
// one resolves it once its record is final, pushes its transaction once
// the record has expired, or waits (server/intents.go); it is retryable.
type IntentError struct {
	RangeID   uint64
	Key       []byte
	Txn       *tidekvpb.TxnRef
	Timestamp hlc.Timestamp
}

func (e *IntentError) Error() string {
	return fmt.Sprintf("key %q of range %d holds an intent of transaction %x (record at %q) at %s: retry once it is resolved",
		e.Key, e.RangeID, e.Txn.GetId(), e.Txn.GetAnchor(), e.Timestamp)
}

// WriteTooOldError: a transaction's write met a committed version at or
// above its timestamp; the transaction restarts above it.
type WriteTooOldError struct {
	RangeID         uint64
	Key             []byte
	Existing, Write hlc.Timestamp
}

func (e *WriteTooOldError) Error() string {
	return fmt.Sprintf("a transaction's write of %q at %s is below its committed version at %s (range %d): restart the transaction above it",
		e.Key, e.Write, e.Existing, e.RangeID)
}

// TxnStatusError: a transaction cannot end as asked, its record being
// final already (an expired record that another transaction pushed is
// ABORTED) or absent.
type TxnStatusError struct {
	Txn    *tidekvpb.TxnRef
	Status tidekvpb.TxnStatus
	Found  bool
}

func (e *TxnStatusError) Error() string {
	if !e.Found {
		return fmt.Sprintf("transaction %x has no record at %q: it never started or was cleaned up", e.Txn.GetId(), e.Txn.GetAnchor())
	}
	return fmt.Sprintf("transaction %x is %s already (an expired transaction is aborted by the first one it blocks)", e.Txn.GetId(), e.Status)
}

// RetryableTxnError reports whether a transaction that met err may run
// again from the start and succeed. A commit that finds its record
// ABORTED, or none (it was aborted and cleaned up: a record is only
// removed once final, and a committed one only after its coordinator
// heard the commit), failed; only a record COMMITTED already is final.
func RetryableTxnError(err error) bool {
	var ie *IntentError
	var wto *WriteTooOldError
	var se *TxnStatusError
	var rc *ReadChangedError
	var ur *UncertainReadError
	return errors.As(err, &ie) || errors.As(err, &wto) || errors.As(err, &rc) || errors.As(err, &ur) || (errors.As(err, &se) && se.Status != tidekvpb.TxnStatus_TXN_COMMITTED)
}

// foreignIntent is the error of a read at key that found ver, an intent:
// nil when it is the reader's own (txn, the reader's transaction ID).
func (r *Replica) foreignIntent(key []byte, ver mvcc.Version, txn []byte) error {
	ref, err := decodeTxnRef(ver.Txn)
	if err != nil || (txn != nil && bytes.Equal(ref.GetId(), txn)) {
		return err
	}
	return &IntentError{RangeID: r.rangeID, Key: append([]byte(nil), key...), Txn: ref, Timestamp: ver.Timestamp}
}

// readVersion reads the version of vk a read at ts (zero: the newest)
// sees; a transaction (txn, its ID) sees its own intent whatever its
// timestamp, since its writes may have been pushed above its reads.
func (r *Replica) readVersion(rd storage.Reader, vk []byte, ts hlc.Timestamp, txn []byte) (mvcc.Version, error) {
	if len(txn) > 0 && !ts.IsZero() {
		newest, err := mvcc.Get(rd, vk, hlc.MaxTimestamp)
		if err != nil || newest.Txn == nil {
			return mvcc.Get(rd, vk, ts)
		}
		if ref, err := decodeTxnRef(newest.Txn); err != nil || bytes.Equal(ref.GetId(), txn) {
			return newest, err
		}
	}
	return mvcc.Get(rd, vk, readAt(ts))
}

func (r *Replica) needTxnVersion() error {
	return r.store.needVersion(LogVersionTxn, "a transaction")
}

// WriteIntents writes ops (puts and deletes of this range) as txn's
// intents at writeTS or, when a read or closed timestamp of their keys is
// at or above it, just above that; it returns the timestamp written at.
func (r *Replica) WriteIntents(ctx context.Context, txn *tidekvpb.TxnRef, writeTS hlc.Timestamp, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	if err := r.needTxnVersion(); err != nil {
		return hlc.Timestamp{}, err
	}
	ks := make([][]byte, len(ops))
	for i, op := range ops {
		if k := op.GetKind(); k != tidekvpb.WriteOp_PUT && k != tidekvpb.WriteOp_DELETE {
			return hlc.Timestamp{}, fmt.Errorf("%w: a transaction writes puts and deletes, not %s", ErrInvalidRequest, k)
		}
		ks[i] = op.GetKey()
	}
	if err := r.checkKey(ks...); err != nil {
		return hlc.Timestamp{}, err
	}
	if err := r.store.admitTimestamp(writeTS, "write"); err != nil {
		return hlc.Timestamp{}, err
	}
	spans := make([]keySpan, len(ks))
	for i, k := range ks {
		spans[i] = pointSpan(k)
	}
	l := r.order.stamp(spans, writeTS, string(txn.GetId()))
	ws, err := logWrites(ops, l.ts)
	if err != nil {
		r.order.release(l, false)
		return hlc.Timestamp{}, err
	}
	cmd := &tidekvpb.RaftCommand{Timestamp: logTimestamp(l.ts),
		Txn: &tidekvpb.TxnCommand{Op: tidekvpb.TxnCommand_WRITE_INTENTS, Txn: txn, Writes: ws}}
	res, err := r.proposeLatched(ctx, cmd, nil, l)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	r.commitWait(ctx, logTimestamp(res.txn.ts))
	return res.txn.ts, nil
}

// HeartbeatTxn creates txn's record PENDING or refreshes its heartbeat;
// the record it returns may say the transaction was aborted meanwhile.
// With refresh it never creates the record: a missing one answers
// *TxnStatusError (not found). A heartbeat that times out may still apply
// later, after the transaction ended and its record was removed (FORGET);
// only a refreshing one then leaves nothing behind. Below log version 14
// refresh is dropped (some replica would ignore it), as before it existed.
func (r *Replica) HeartbeatTxn(ctx context.Context, txn *tidekvpb.TxnRef, refresh bool) (*tidekvpb.TxnRecord, error) {
	refresh = refresh && r.store.LogVersion() >= LogVersionHeartbeatRefresh
	return r.proposeRecord(ctx, &tidekvpb.TxnCommand{Op: tidekvpb.TxnCommand_HEARTBEAT, Txn: txn, Refresh: refresh})
}

// EndTxn sets txn's record to status: COMMITTED at commitTS, or ABORTED.
// A record already final otherwise refuses (*TxnStatusError).
func (r *Replica) EndTxn(ctx context.Context, txn *tidekvpb.TxnRef, status tidekvpb.TxnStatus, commitTS hlc.Timestamp) (*tidekvpb.TxnRecord, error) {
	c := &tidekvpb.TxnCommand{Op: tidekvpb.TxnCommand_END, Txn: txn, Status: status}
	if !commitTS.IsZero() {
		c.CommitTimestamp = logTimestamp(commitTS)
	}
	return r.proposeRecord(ctx, c)
}

// ForgetTxn removes txn's record if it is final; its intents must be
// resolved already (a pusher that met one would take the missing record
// for a transaction aborted early).
func (r *Replica) ForgetTxn(ctx context.Context, txn *tidekvpb.TxnRef) (*tidekvpb.TxnRecord, error) {
	if err := r.store.needVersion(LogVersionOnePhase, "removing a transaction record"); err != nil {
		return nil, err
	}
	return r.proposeRecord(ctx, &tidekvpb.TxnCommand{Op: tidekvpb.TxnCommand_FORGET, Txn: txn})
}

// TxnRecords counts the transaction records in this replica's data by
// status.
func (r *Replica) TxnRecords() (map[tidekvpb.TxnStatus]int, error) {
	d := r.desc.Load()
	if d == nil || !r.VersionedLayout() {
		return nil, nil
	}
	lo, hi := mvcc.EngineSpan(keys.VersionedSpan(d.GetStartKey(), d.GetEndKey()))
	it, err := r.store.eng.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := map[tidekvpb.TxnStatus]int{}
	for ok := it.First(); ok; ok = it.Next() {
		if !mvcc.IsRecordKey(it.Key()) {
			continue
		}
		rec := &tidekvpb.TxnRecord{}
		if err := proto.Unmarshal(it.Value(), rec); err != nil {
			return nil, fmt.Errorf("range %d: corrupt transaction record %q: %v", r.rangeID, it.Key(), err)
		}
		out[rec.GetStatus()]++
	}
	return out, nil
}

// PushTxn aborts txn if its record's last heartbeat is more than expiry
// old by this leaseholder's clock (or it has none), and returns the record.
func (r *Replica) PushTxn(ctx context.Context, txn *tidekvpb.TxnRef, expiry time.Duration) (*tidekvpb.TxnRecord, error) {
	return r.proposeRecord(ctx, &tidekvpb.TxnCommand{Op: tidekvpb.TxnCommand_PUSH, Txn: txn, ExpiryNanos: expiry.Nanoseconds()})
}

func (r *Replica) proposeRecord(ctx context.Context, c *tidekvpb.TxnCommand) (*tidekvpb.TxnRecord, error) {
	if err := r.needTxnVersion(); err != nil {
		return nil, err
	}
	if err := r.checkKey(c.GetTxn().GetAnchor()); err != nil {
		return nil, err
	}
	if err := r.admitCommit(c); err != nil {
		return nil, err
	}
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Timestamp: logTimestamp(r.store.hlc.Now()), Txn: c}, nil)
	if err != nil {
		return nil, err
	}
	return res.txn.record, nil
}

// admitCommit admits the commit timestamp c carries, if any, as reads and
// intents admit theirs (Store.admitTimestamp): a record committed, or
// intents resolved, beyond the maximum offset of this node's clock would
// put values where no read at a clock within the offset assumption sees
// them until real time passes them.
func (r *Replica) admitCommit(c *tidekvpb.TxnCommand) error {
	if ts := commandTimestamp(c.GetCommitTimestamp()); !ts.IsZero() {
		return r.store.admitTimestamp(ts, "commit")
	}
	return nil
}

// ResolveIntents commits txn's intents on ks (keys of this range) at
// commitTS (status COMMITTED) or removes them (ABORTED).
func (r *Replica) ResolveIntents(ctx context.Context, txn *tidekvpb.TxnRef, ks [][]byte, status tidekvpb.TxnStatus, commitTS hlc.Timestamp) error {
	if err := r.needTxnVersion(); err != nil {
		return err
	}
	if err := r.checkKey(ks...); err != nil {
		return err
	}
	c := &tidekvpb.TxnCommand{Op: tidekvpb.TxnCommand_RESOLVE, Txn: txn, Keys: ks, Status: status}
	if !commitTS.IsZero() {
		c.CommitTimestamp = logTimestamp(commitTS)
	}
	if err := r.admitCommit(c); err != nil {
		return err
	}
	_, err := r.propose(ctx, &tidekvpb.RaftCommand{Timestamp: logTimestamp(r.store.hlc.Now()), Txn: c}, nil)
	return err
}

// MayHoldIntents reports whether an intent was ever written to the range
// (ReplicaState.may_hold_intents).
func (r *Replica) MayHoldIntents() bool { return r.mayHoldIntents.Load() }

// Intents lists up to limit of the range's intents, as this replica's data
// has them: what the GC queue pushes (the intents nobody runs into) and
// what tests check is gone.
func (r *Replica) Intents(limit int) ([]*IntentError, error) {
	d := r.desc.Load()
	if d == nil || !r.VersionedLayout() {
		return nil, nil
	}
	var out []*IntentError
	lo, hi := keys.VersionedSpan(d.GetStartKey(), d.GetEndKey())
	for from := lo; from != nil && len(out) < limit; {
		_, resume, err := mvcc.ScanNewest(r.store.eng, from, hi, r.readNow(), 1024, 1<<20)
		var ie *mvcc.IntentError
		if errors.As(err, &ie) {
			ref, derr := decodeTxnRef(ie.Txn)
			if derr != nil {
				return nil, derr
			}
			out = append(out, &IntentError{RangeID: r.rangeID, Key: keys.UserKey(ie.Key), Txn: ref, Timestamp: ie.Timestamp})
			resume, err = append(ie.Key, 0), nil // the next key after it
		}
		if err != nil {
			return nil, err
		}
		from = resume
	}
	return out, nil
}
