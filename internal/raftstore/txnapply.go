package raftstore

import (
	"bytes"
	"fmt"
	"log"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
)

// Transactions at apply (log version 7, docs/transactions.md step 5). A
// TxnCommand is evaluated from the command and the range's data only, so
// every replica decides the same:
//
//   - WRITE_INTENTS writes the transaction's puts and deletes as intents
//     (mvcc versions carrying its TxnRef) at the command's timestamp, or
//     refuses them all: another transaction's intent on a key
//     (*IntentError) or a committed version at or above the timestamp
//     (*WriteTooOldError).
//   - HEARTBEAT, END and PUSH read and write the record beside the anchor's
//     versions (mvcc.RecordKey), so splits, merges and snapshots carry it.
//     The command's timestamp is the "now" a heartbeat records and a push
//     judges expiry at; the expiry travels in the command.
//   - RESOLVE commits the transaction's intents at the commit timestamp or
//     removes them; keys without its intent are left alone (already
//     resolved), so resolving twice is harmless.
//
// Intents and resolutions read the engine's versions, so the apply batch is
// committed before them and after them (as for GC): the batch cannot be
// read, and the commands around them must see what they changed.

// txnResult is what a transaction command's apply answers.
type txnResult struct {
	ts     hlc.Timestamp       // WRITE_INTENTS: the intents' timestamp
	record *tidekvpb.TxnRecord // HEARTBEAT, END, PUSH: the record after
	status tidekvpb.TxnStatus  // its status (PENDING when absent)
}

func (r *Replica) applyTxnLocked(ab *applyBatch, cmd *tidekvpb.RaftCommand) applyResult {
	c := cmd.GetTxn()
	ts := commandTimestamp(cmd.GetTimestamp())
	if !isMVCC(r.mu.state) {
		return applyResult{err: fmt.Errorf("%w: range %d has not moved to the versioned layout, which transactions need: retry", ErrLogVersion, r.rangeID)}
	}
	if ts.IsZero() || len(c.GetTxn().GetId()) == 0 {
		return applyResult{err: fmt.Errorf("%w: a transaction command needs a timestamp and a transaction ID", ErrInvalidRequest)}
	}
	switch c.GetOp() {
	case tidekvpb.TxnCommand_WRITE_INTENTS:
		return r.applyIntentsLocked(ab, c, ts)
	case tidekvpb.TxnCommand_RESOLVE:
		return r.applyResolveLocked(ab, c)
	case tidekvpb.TxnCommand_ONE_PHASE:
		return r.applyOnePhaseLocked(ab, c, ts)
	case tidekvpb.TxnCommand_FORGET:
		return r.applyForgetLocked(ab, c)
	case tidekvpb.TxnCommand_HEARTBEAT, tidekvpb.TxnCommand_END, tidekvpb.TxnCommand_PUSH:
		if err := r.checkKeysLocked(c.GetTxn().GetAnchor()); err != nil {
			return applyResult{err: err}
		}
		rec, err := r.applyRecordLocked(ab, c, ts)
		if err != nil {
			return applyResult{err: err}
		}
		return applyResult{txn: &txnResult{record: rec, status: rec.GetStatus()}}
	}
	return applyResult{err: fmt.Errorf("%w: unknown transaction operation %d", ErrInvalidRequest, c.GetOp())}
}

// encodeTxnRef is the bytes an intent carries for ref (deterministic, so
// every replica stores the same).
func encodeTxnRef(ref *tidekvpb.TxnRef) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&tidekvpb.TxnRef{Id: ref.GetId(), Anchor: ref.GetAnchor()})
	if err != nil {
		log.Fatalf("encoding a transaction reference: %v", err)
	}
	return b
}

// decodeTxnRef reads an intent's transaction (nil for a committed version).
func decodeTxnRef(b []byte) (*tidekvpb.TxnRef, error) {
	if b == nil {
		return nil, nil
	}
	ref := &tidekvpb.TxnRef{}
	if err := proto.Unmarshal(b, ref); err != nil || len(ref.GetId()) == 0 {
		return nil, fmt.Errorf("%w: an intent's transaction reference does not decode", mvcc.ErrInvalidValue)
	}
	return ref, nil
}

// newestVersion reads key's newest version from the engine (the batch is
// committed), with its intent's transaction.
func (r *Replica) newestVersion(key []byte) (mvcc.Version, *tidekvpb.TxnRef) {
	ver, err := mvcc.Get(r.store.eng, keys.VersionedKey(key), hlc.MaxTimestamp)
	var ref *tidekvpb.TxnRef
	if err == nil {
		ref, err = decodeTxnRef(ver.Txn)
	}
	if err != nil {
		log.Fatalf("range %d: read during apply: %v", r.rangeID, err)
	}
	return ver, ref
}

func (r *Replica) applyIntentsLocked(ab *applyBatch, c *tidekvpb.TxnCommand, ts hlc.Timestamp) applyResult {
	id := c.GetTxn().GetId()
	for _, w := range c.GetWrites() {
		if err := r.checkKeysLocked(w.GetKey()); err != nil {
			return applyResult{err: err}
		}
		if err := checkTxnWrite(w); err != nil {
			return applyResult{err: err}
		}
	}
	if thr := gcThresholdOf(r.mu.state); !thr.Less(ts) && !thr.IsZero() {
		ts = thr.Next() // see mvccgc.go
	}
	r.mustWrite(r.flushAppliedLocked(ab))
	// Check every key before writing any: the command is all or nothing.
	own := make([]mvcc.Version, len(c.GetWrites()))
	for i, w := range c.GetWrites() {
		ver, ref := r.newestVersion(w.GetKey())
		switch {
		case ref != nil && !bytes.Equal(ref.GetId(), id):
			return applyResult{err: &IntentError{RangeID: r.rangeID, Key: w.GetKey(), Txn: ref, Timestamp: ver.Timestamp}}
		case ref != nil:
			own[i] = ver // our own earlier intent: replaced
		case !ver.Timestamp.IsZero() && !ver.Timestamp.Less(ts):
			return applyResult{err: &WriteTooOldError{RangeID: r.rangeID, Key: w.GetKey(), Existing: ver.Timestamp, Write: ts}}
		}
	}
	txn := encodeTxnRef(c.GetTxn())
	for i, w := range c.GetWrites() {
		vk := keys.VersionedKey(w.GetKey())
		at := ts
		if !own[i].Timestamp.IsZero() {
			r.mustWrite(mvcc.ClearVersion(ab.b, vk, own[i].Timestamp))
			if ts.Less(own[i].Timestamp) {
				at = own[i].Timestamp
			}
		}
		if w.GetDelete() {
			r.mustWrite(mvcc.DeleteIntent(ab.b, vk, at, txn))
		} else {
			r.mustWrite(mvcc.PutIntent(ab.b, vk, at, w.GetValue(), w.GetExpiresAt(), txn))
		}
		r.mu.versionBound.note(at)
		ts = maxTS(ts, at)
	}
	r.setMayHoldIntentsLocked()
	r.mustWrite(r.flushAppliedLocked(ab))
	return applyResult{txn: &txnResult{ts: ts}}
}

// checkTxnWrite refuses what a transaction's write cannot do: keep the
// key's TTL or change only its expiry (EXPIRE). A put may expire at a set
// time (log version 8: a binary at 7 refuses it, and no node proposes one
// before every node applies 8).
func checkTxnWrite(w *tidekvpb.LogWrite) error {
	if w.GetExpire() || w.GetKeepTtl() || (w.GetDelete() && (len(w.GetValue()) > 0 || w.GetExpiresAt() != 0)) {
		return fmt.Errorf("%w: a transaction's write of %q keeps or changes only a TTL, which transactions do not do", ErrInvalidRequest, w.GetKey())
	}
	return nil
}

func (r *Replica) setMayHoldIntentsLocked() {
	r.mu.state.MayHoldIntents = true
	r.mayHoldIntents.Store(true)
}

func (r *Replica) applyResolveLocked(ab *applyBatch, c *tidekvpb.TxnCommand) applyResult {
	st, commitTS := c.GetStatus(), commandTimestamp(c.GetCommitTimestamp())
	if st == tidekvpb.TxnStatus_TXN_PENDING || (st == tidekvpb.TxnStatus_TXN_COMMITTED && commitTS.IsZero()) {
		return applyResult{err: fmt.Errorf("%w: resolving intents needs a final status, and a commit its timestamp", ErrInvalidRequest)}
	}
	if err := r.checkKeysLocked(c.GetKeys()...); err != nil {
		return applyResult{err: err}
	}
	r.mustWrite(r.flushAppliedLocked(ab))
	for _, k := range c.GetKeys() {
		ver, ref := r.newestVersion(k)
		if ref == nil || !bytes.Equal(ref.GetId(), c.GetTxn().GetId()) {
			continue // resolved already (an intent is always its key's newest version)
		}
		vk := keys.VersionedKey(k)
		r.mustWrite(mvcc.ClearVersion(ab.b, vk, ver.Timestamp))
		if st == tidekvpb.TxnStatus_TXN_ABORTED {
			continue
		}
		at := maxTS(commitTS, ver.Timestamp)
		if ver.Tombstone {
			r.mustWrite(mvcc.Delete(ab.b, vk, at))
		} else {
			r.mustWrite(mvcc.PutExpiring(ab.b, vk, at, ver.Value, ver.ExpiresAt))
		}
		r.mu.versionBound.note(at)
	}
	r.mustWrite(r.flushAppliedLocked(ab))
	return applyResult{txn: &txnResult{}}
}

// applyRecordLocked runs a HEARTBEAT, END or PUSH on the record and
// returns the record as it leaves it.
func (r *Replica) applyRecordLocked(ab *applyBatch, c *tidekvpb.TxnCommand, ts hlc.Timestamp) (*tidekvpb.TxnRecord, error) {
	rk, rec, found := r.recordLocked(ab, c.GetTxn())
	next, err := recordTransition(rec, found, c, ts)
	if err != nil || next == nil {
		return rec, err
	}
	if err := putProto(ab.b, rk, next); err != nil {
		log.Fatalf("range %d: %v", r.rangeID, err)
	}
	ab.overlay[string(rk)], _ = proto.Marshal(next)
	return next, nil
}

// recordLocked reads txn's record as the batch sees it (an empty one when
// there is none).
func (r *Replica) recordLocked(ab *applyBatch, txn *tidekvpb.TxnRef) (rk []byte, rec *tidekvpb.TxnRecord, found bool) {
	rk = mvcc.RecordKey(keys.VersionedKey(txn.GetAnchor()), txn.GetId())
	rec = &tidekvpb.TxnRecord{}
	raw, found := ab.mustGet(r, rk)
	if found {
		if err := proto.Unmarshal(raw, rec); err != nil {
			log.Fatalf("range %d: corrupt transaction record %q: %v", r.rangeID, rk, err)
		}
	}
	return rk, rec, found
}

// applyForgetLocked removes a final record (the coordinator or a resolver
// resolved its intents); a pending one stays, and so does the answer.
func (r *Replica) applyForgetLocked(ab *applyBatch, c *tidekvpb.TxnCommand) applyResult {
	if err := r.checkKeysLocked(c.GetTxn().GetAnchor()); err != nil {
		return applyResult{err: err}
	}
	rk, rec, found := r.recordLocked(ab, c.GetTxn())
	if found && rec.GetStatus() != tidekvpb.TxnStatus_TXN_PENDING {
		r.mustWrite(ab.del(rk))
	}
	return applyResult{txn: &txnResult{record: rec, status: rec.GetStatus()}}
}

// recordTransition decides what a record becomes (nil: unchanged): the
// rules of HEARTBEAT, END and PUSH, a function of the record and the
// command only.
func recordTransition(rec *tidekvpb.TxnRecord, found bool, c *tidekvpb.TxnCommand, ts hlc.Timestamp) (*tidekvpb.TxnRecord, error) {
	final := found && rec.GetStatus() != tidekvpb.TxnStatus_TXN_PENDING
	next := &tidekvpb.TxnRecord{Txn: c.GetTxn(), Status: rec.GetStatus(), CommitTimestamp: rec.GetCommitTimestamp(), HeartbeatWallNanos: rec.GetHeartbeatWallNanos()}
	switch c.GetOp() {
	case tidekvpb.TxnCommand_HEARTBEAT:
		if final {
			return nil, nil // the coordinator learns the status from the answer
		}
		if !found && c.GetRefresh() {
			return nil, &TxnStatusError{Txn: c.GetTxn()}
		}
		next.HeartbeatWallNanos = max(next.GetHeartbeatWallNanos(), ts.WallTime)
		return next, nil
	case tidekvpb.TxnCommand_PUSH:
		if c.GetExpiryNanos() <= 0 {
			return nil, fmt.Errorf("%w: a push needs a positive expiry", ErrInvalidRequest)
		}
		// No record: the transaction never wrote an intent (its record
		// comes first) or its record is gone; ABORTED keeps it from
		// starting later.
		if final || (found && ts.WallTime-rec.GetHeartbeatWallNanos() <= c.GetExpiryNanos()) {
			return nil, nil
		}
		next.Status = tidekvpb.TxnStatus_TXN_ABORTED
		return next, nil
	case tidekvpb.TxnCommand_END:
		want := c.GetStatus()
		switch {
		case want == tidekvpb.TxnStatus_TXN_PENDING || (want == tidekvpb.TxnStatus_TXN_COMMITTED && commandTimestamp(c.GetCommitTimestamp()).IsZero()):
			return nil, fmt.Errorf("%w: ending a transaction needs a final status, and a commit its timestamp", ErrInvalidRequest)
		case final && rec.GetStatus() == want:
			return nil, nil // ended twice: the same answer
		case final || (!found && want == tidekvpb.TxnStatus_TXN_COMMITTED):
			return nil, &TxnStatusError{Txn: c.GetTxn(), Status: rec.GetStatus(), Found: found}
		}
		next.Status, next.CommitTimestamp = want, c.GetCommitTimestamp()
		if want == tidekvpb.TxnStatus_TXN_ABORTED {
			next.CommitTimestamp = nil
		}
		return next, nil
	}
	return nil, fmt.Errorf("%w: %s is not a record operation", ErrInvalidRequest, c.GetOp())
}

// checkIntentsLocked refuses a non-transactional write or CAS of ks when
// one holds another transaction's intent: it must not overwrite a value
// that may yet commit. Only ranges an intent was ever written to read.
func (r *Replica) checkIntentsLocked(data rangeData, ks ...[]byte) error {
	v, ok := data.(*versionedData)
	if !ok || !r.mu.state.GetMayHoldIntents() {
		return nil
	}
	for _, k := range ks {
		ver := v.newest(k)
		if ver.Txn == nil {
			continue
		}
		ref, err := decodeTxnRef(ver.Txn)
		r.mustWrite(err)
		return &IntentError{RangeID: r.rangeID, Key: k, Txn: ref, Timestamp: ver.Timestamp}
	}
	return nil
}
