package raftstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
)

// One-phase commit (docs/transactions.md "Single-range transactions: one
// Raft round"): a transaction that has written nothing yet and whose reads
// and writes all lie in this range commits in one command, with no
// intents and no record. The leaseholder stamps it like any write, above
// the reads of its written keys, records its reads at that timestamp so
// no later write of them lands below it, and waits for the writes in
// flight at or below it on them. Apply then checks, from the engine only,
// that no read key or scanned span changed since the read timestamp and no written key
// holds an intent or a version at or above the timestamp, and writes the
// values as committed versions; or writes nothing.

// CommitOnePhase commits the transaction txn (its ID) that read reads and
// scanned scans at readTS and writes ops, all in this range, in one Raft
// command; it
// returns the commit timestamp. A changed read (*ReadChangedError), an
// intent (*IntentError) or a newer version of a written key
// (*WriteTooOldError) refuses it with nothing written; the transaction
// restarts.
func (r *Replica) CommitOnePhase(ctx context.Context, txn []byte, readTS hlc.Timestamp, reads [][]byte, scans []*tidekvpb.KeySpan, ops []*tidekvpb.WriteOp) (hlc.Timestamp, error) {
	if err := r.store.needVersion(LogVersionOnePhase, "a one-phase commit"); err != nil {
		return hlc.Timestamp{}, err
	}
	wspans, rspans, err := r.onePhaseSpans(reads, scans, ops)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	if err := r.checkGCThreshold(readTS); err != nil {
		return hlc.Timestamp{}, err
	}
	if err := r.store.admitTimestamp(readTS, "read"); err != nil {
		return hlc.Timestamp{}, err
	}
	l, waits := r.order.stampReading(wspans, rspans, maxTS(r.store.hlc.Now(), readTS), string(txn))
	if err := r.waitLatches(ctx, waits); err != nil {
		r.order.release(l, false)
		return hlc.Timestamp{}, err
	}
	ws, err := logWrites(ops, l.ts)
	if err != nil {
		r.order.release(l, false)
		return hlc.Timestamp{}, err
	}
	cmd := &tidekvpb.RaftCommand{Timestamp: logTimestamp(l.ts), Txn: &tidekvpb.TxnCommand{Op: tidekvpb.TxnCommand_ONE_PHASE,
		Txn: &tidekvpb.TxnRef{Id: txn}, Writes: ws, Keys: reads, ReadSpans: scans, ReadTimestamp: logTimestamp(readTS)}}
	res, err := r.proposeLatched(ctx, cmd, nil, l)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	r.commitWait(ctx, logTimestamp(res.txn.ts))
	return res.txn.ts, nil
}

// onePhaseSpans checks that a one-phase commit's keys and scanned spans lie
// in the range and returns the spans of its writes and its reads.
func (r *Replica) onePhaseSpans(reads [][]byte, scans []*tidekvpb.KeySpan, ops []*tidekvpb.WriteOp) (writes, read []keySpan, err error) {
	if len(ops) == 0 {
		return nil, nil, fmt.Errorf("%w: a one-phase commit writes something", ErrInvalidRequest)
	}
	ks := make([][]byte, 0, len(ops)+len(reads))
	for _, op := range ops {
		if k := op.GetKind(); k != tidekvpb.WriteOp_PUT && k != tidekvpb.WriteOp_DELETE {
			return nil, nil, fmt.Errorf("%w: a transaction writes puts and deletes, not %s", ErrInvalidRequest, k)
		}
		ks = append(ks, op.GetKey())
		writes = append(writes, pointSpan(op.GetKey()))
	}
	for _, k := range reads {
		ks = append(ks, k)
		read = append(read, pointSpan(k))
	}
	for _, sp := range scans {
		read = append(read, keySpan{start: sp.GetStartKey(), end: sp.GetEndKey()})
	}
	if err := r.checkKey(ks...); err != nil {
		return nil, nil, err
	}
	return writes, read, checkSpans(r.desc.Load(), scans)
}

// checkSpans refuses spans that do not lie wholly in the range d
// describes.
func checkSpans(d *tidekvpb.RangeDescriptor, spans []*tidekvpb.KeySpan) error {
	for _, sp := range spans {
		end, dend := sp.GetEndKey(), d.GetEndKey()
		if !keys.Contains(d.GetStartKey(), dend, sp.GetStartKey()) {
			return &KeyMismatchError{Key: sp.GetStartKey(), Desc: d}
		}
		if len(dend) > 0 && (len(end) == 0 || bytes.Compare(end, dend) > 0) {
			return &KeyMismatchError{Key: end, Desc: d} // the span's end (empty: unbounded)
		}
	}
	return nil
}

func (r *Replica) applyOnePhaseLocked(ab *applyBatch, c *tidekvpb.TxnCommand, ts hlc.Timestamp) applyResult {
	readTS := commandTimestamp(c.GetReadTimestamp())
	ks := append([][]byte(nil), c.GetKeys()...)
	for _, w := range c.GetWrites() {
		if err := checkTxnWrite(w); err != nil {
			return applyResult{err: err}
		}
		ks = append(ks, w.GetKey())
	}
	if err := r.checkKeysLocked(ks...); err != nil {
		return applyResult{err: err}
	}
	if err := checkSpans(r.mu.state.GetDesc(), c.GetReadSpans()); err != nil {
		return applyResult{err: err}
	}
	if readTS.IsZero() || ts.Less(readTS) {
		return applyResult{err: fmt.Errorf("%w: a one-phase commit needs a read timestamp at or below its own", ErrInvalidRequest)}
	}
	if thr := gcThresholdOf(r.mu.state); readTS.Less(thr) || (!thr.IsZero() && !thr.Less(ts)) {
		return applyResult{err: &GCThresholdError{RangeID: r.rangeID, Read: readTS, Threshold: thr}}
	}
	r.mustWrite(r.flushAppliedLocked(ab))
	if err := r.onePhaseConflictLocked(c, readTS, ts); err != nil {
		return applyResult{err: err}
	}
	for _, w := range c.GetWrites() {
		vk := keys.VersionedKey(w.GetKey())
		if w.GetDelete() {
			if cur, _ := r.newestVersion(w.GetKey()); cur.Found() {
				r.mustWrite(mvcc.Delete(ab.b, vk, ts))
			}
		} else {
			r.mustWrite(mvcc.PutExpiring(ab.b, vk, ts, w.GetValue(), w.GetExpiresAt()))
		}
	}
	r.mu.versionBound.note(ts)
	r.mustWrite(r.flushAppliedLocked(ab))
	return applyResult{txn: &txnResult{ts: ts}}
}

// onePhaseConflictLocked is why a one-phase commit at ts of a transaction
// that read at readTS cannot apply, if anything: a read key changed in
// (readTS, ts] or holds an intent at or below ts, or a written key holds
// an intent or a version at or above ts. The batch is flushed, so the
// engine holds every earlier command's writes; a transaction committing
// in one phase has no intents of its own.
func (r *Replica) onePhaseConflictLocked(c *tidekvpb.TxnCommand, readTS, ts hlc.Timestamp) error {
	for _, k := range c.GetKeys() {
		ver, err := mvcc.Get(r.store.eng, keys.VersionedKey(k), ts)
		r.mustWrite(err)
		if ver.Txn != nil {
			return r.foreignIntent(k, ver, nil)
		}
		if readTS.Less(ver.Timestamp) {
			return &ReadChangedError{RangeID: r.rangeID, Key: append([]byte(nil), k...), At: ver.Timestamp}
		}
	}
	for _, sp := range c.GetReadSpans() {
		// Apply judges as every binary at this log version does: no
		// transaction of its own, and expiry not counted (a replica that
		// counted it could reach another outcome than one that did not).
		if err := r.spanChanged(r.store.eng, sp, readTS, ts, mvcc.ChangeOptions{}); err != nil {
			return err
		}
	}
	for _, w := range c.GetWrites() {
		ver, ref := r.newestVersion(w.GetKey())
		switch {
		case ref != nil:
			return &IntentError{RangeID: r.rangeID, Key: w.GetKey(), Txn: ref, Timestamp: ver.Timestamp}
		case !ver.Timestamp.IsZero() && !ver.Timestamp.Less(ts):
			return &WriteTooOldError{RangeID: r.rangeID, Key: w.GetKey(), Existing: ver.Timestamp, Write: ts}
		}
	}
	return nil
}
