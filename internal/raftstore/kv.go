package raftstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/hlc"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Request evaluation on a replica. Writes are evaluated when applied, so
// every replica computes the same outcome; linearizable reads are served by
// the leaseholder from local state once it has applied everything committed
// when the read arrived, other reads as closed.go explains.

// Get reads one key.
func (r *Replica) Get(ctx context.Context, key []byte, ro ReadOptions) ([]byte, bool, error) {
	if err := r.checkRead(ctx, ro); err != nil {
		return nil, false, err
	}
	if err := r.checkKey(key); err != nil {
		return nil, false, err
	}
	for {
		lv, err := r.readLayout(ctx)
		if err != nil {
			return nil, false, err
		}
		v, found, err := r.get(r.store.eng, lv.mvcc, key, ro.Timestamp)
		if r.stillLayout(lv) {
			return v, found, cmp.Or(err, r.checkGCThreshold(ro.Timestamp))
		}
	}
}

// get reads key from rd in a layout, at ts (zero: the newest version).
func (r *Replica) get(rd storage.Reader, versioned bool, key []byte, ts hlc.Timestamp) ([]byte, bool, error) {
	buf := keyBufs.Get().(*[]byte)
	defer keyBufs.Put(buf)
	if !versioned {
		*buf = keys.AppendDataKey((*buf)[:0], r.rangeID, key)
		return rd.Get(*buf)
	}
	*buf = keys.AppendVersionedKey((*buf)[:0], key)
	ver, err := mvcc.Get(rd, *buf, readAt(ts))
	return ver.Value, ver.Found(), err
}

// readAt is the mvcc read timestamp of a read at ts (zero: the newest).
func readAt(ts hlc.Timestamp) hlc.Timestamp {
	if ts.IsZero() {
		return hlc.MaxTimestamp
	}
	return ts
}

// keyBufs holds engine-key buffers for point reads: a read's only
// allocation is then its value (the engine copies it out).
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

// BatchGet reads several keys of this range at one point.
func (r *Replica) BatchGet(ctx context.Context, ks [][]byte, ro ReadOptions) ([]*tidekvpb.GetResponse, error) {
	if err := r.checkRead(ctx, ro); err != nil {
		return nil, err
	}
	if err := r.checkKey(ks...); err != nil {
		return nil, err
	}
	for {
		lv, err := r.readLayout(ctx)
		if err != nil {
			return nil, err
		}
		out, err := r.batchGet(lv.mvcc, ks, ro.Timestamp)
		if r.stillLayout(lv) {
			return out, cmp.Or(err, r.checkGCThreshold(ro.Timestamp))
		}
	}
}

func (r *Replica) batchGet(versioned bool, ks [][]byte, ts hlc.Timestamp) ([]*tidekvpb.GetResponse, error) {
	snap := r.store.eng.NewSnapshot()
	defer snap.Close()
	out := make([]*tidekvpb.GetResponse, len(ks))
	for i, k := range ks {
		v, ok, err := r.get(snap, versioned, k, ts)
		if err != nil {
			return nil, err
		}
		out[i] = &tidekvpb.GetResponse{Found: ok, Value: v}
	}
	return out, nil
}

// Scan reads keys in [start, end) clipped to this range, at most limit keys
// and about maxBytes bytes. resume is where the caller continues (empty when
// the scan is complete).
func (r *Replica) Scan(ctx context.Context, start, end []byte, limit int, maxBytes int, ro ReadOptions) (kvs []*tidekvpb.KeyValue, resume []byte, err error) {
	if limit <= 0 || maxBytes <= 0 {
		return nil, nil, fmt.Errorf("%w: scan limit and byte budget must be positive", ErrInvalidRequest)
	}
	if err := r.checkRead(ctx, ro); err != nil {
		return nil, nil, err
	}
	if err := r.checkKey(start); err != nil {
		return nil, nil, err
	}
	d := r.desc.Load()
	upper := end
	clipped := false
	if len(d.GetEndKey()) > 0 && (len(end) == 0 || bytes.Compare(d.GetEndKey(), end) < 0) {
		upper, clipped = d.GetEndKey(), true
	}
	for {
		lv, err := r.readLayout(ctx)
		if err != nil {
			return nil, nil, err
		}
		scan := r.scanUnversioned
		if lv.mvcc {
			scan = r.scanVersioned
		}
		kvs, resume, err = scan(start, upper, limit, maxBytes, ro.Timestamp)
		if r.stillLayout(lv) {
			err = cmp.Or(err, r.checkGCThreshold(ro.Timestamp))
			break
		}
	}
	if err == nil && resume == nil && clipped {
		resume = append([]byte(nil), upper...)
	}
	return kvs, resume, err
}

// scanUnversioned scans [start, upper) (empty upper: the range's end);
// resume is nil when it read to the end.
func (r *Replica) scanUnversioned(start, upper []byte, limit, maxBytes int, _ hlc.Timestamp) (kvs []*tidekvpb.KeyValue, resume []byte, err error) {
	lo, hi := keys.DataSpan(r.rangeID, start, upper)
	it, err := r.store.eng.NewIter(lo, hi)
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	size := 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(kvs) >= limit || size >= maxBytes {
			last := kvs[len(kvs)-1].Key
			return kvs, append(append([]byte(nil), last...), 0), nil
		}
		k := append([]byte(nil), keys.UserKey(it.Key())...)
		v := append([]byte(nil), it.Value()...)
		size += len(k) + len(v)
		kvs = append(kvs, &tidekvpb.KeyValue{Key: k, Value: v})
	}
	return kvs, nil, nil
}

// scanVersioned is scanUnversioned on the versioned layout, reading at ts
// (zero: the newest versions).
func (r *Replica) scanVersioned(start, upper []byte, limit, maxBytes int, ts hlc.Timestamp) ([]*tidekvpb.KeyValue, []byte, error) {
	lo, hi := keys.VersionedSpan(start, upper)
	found, resume, err := mvcc.Scan(r.store.eng, lo, hi, readAt(ts), limit, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	kvs := make([]*tidekvpb.KeyValue, len(found))
	for i, kv := range found {
		kvs[i] = &tidekvpb.KeyValue{Key: keys.UserKey(kv.Key), Value: kv.Value}
	}
	if resume != nil {
		resume = keys.UserKey(resume)
	}
	return kvs, resume, nil
}

func (r *Replica) checkKey(ks ...[]byte) error {
	d := r.desc.Load()
	if d == nil {
		return &RangeNotFoundError{RangeID: r.rangeID}
	}
	for _, k := range ks {
		if !keys.Contains(d.GetStartKey(), d.GetEndKey(), k) {
			return &KeyMismatchError{Key: k, Desc: d}
		}
	}
	return nil
}

// Write applies ops atomically; deleted reports whether any deleted key existed.
func (r *Replica) Write(ctx context.Context, ops []*tidekvpb.WriteOp) (deleted bool, err error) {
	ks := make([][]byte, len(ops))
	for i, op := range ops {
		ks[i] = op.GetKey()
	}
	if err := r.checkKey(ks...); err != nil {
		return false, err
	}
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Writes: logWrites(ops), Timestamp: r.proposalTimestamp()}, nil)
	return res.deleted, err
}

// WriteGuarded applies ops under guard (nil: none) in one Raft command and
// returns what the write found: whether the guard held, and with
// wantExisted which op keys existed (see tidekvpb.WriteRequest).
func (r *Replica) WriteGuarded(ctx context.Context, ops []*tidekvpb.WriteOp, guard *tidekvpb.WriteGuard, wantExisted bool) (*tidekvpb.WriteResponse, error) {
	ks := make([][]byte, 0, len(ops)+1)
	for _, op := range ops {
		ks = append(ks, op.GetKey())
	}
	if guard != nil {
		ks = append(ks, guard.GetKey())
	}
	if err := r.checkKey(ks...); err != nil {
		return nil, err
	}
	if guard != nil {
		if err := r.store.needVersion(LogVersionShared, "a guarded write (Redis hash commands)"); err != nil {
			return nil, err
		}
	}
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Writes: logWrites(ops), WriteGuard: logGuard(guard), WantExisted: wantExisted,
		Timestamp: r.proposalTimestamp()}, nil)
	return res.write, err
}

// CompareAndSet applies a conditional write.
func (r *Replica) CompareAndSet(ctx context.Context, req *tidekvpb.CompareAndSetRequest) (*tidekvpb.CompareAndSetResponse, error) {
	if err := r.checkKey(req.GetKey()); err != nil {
		return nil, err
	}
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Cas: logCAS(req), Timestamp: r.proposalTimestamp()}, nil)
	return res.cas, err
}

// ProposeMeta runs a command on the meta range; it returns the allocated ID
// for commands that allocate one.
func (r *Replica) ProposeMeta(ctx context.Context, mc *tidekvpb.MetaCommand) (uint64, error) {
	res, err := r.propose(ctx, &tidekvpb.RaftCommand{Meta: mc}, nil)
	return res.metaID, err
}

// LeaseRead waits until local state may be read linearizably.
func (r *Replica) LeaseRead(ctx context.Context) error { return r.waitLeaseRead(ctx) }
