package kvapi

import (
	"bytes"
	"context"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// GetResult is what a Get found: the value and the generation of the
// range that served it.
type GetResult struct {
	raftstore.Value
	Generation uint64
}

// Get is the value of key.
func (a *API) Get(ctx context.Context, key []byte, o Options) (GetResult, error) {
	validate := func() error {
		if err := a.CheckKey(key); err != nil {
			return err
		}
		return a.node.CheckKeySpace(ctx, o.KeySpace, key)
	}
	return Run(ctx, a, "get", validate, key, 0, o.Replica, func(r *raftstore.Replica) (GetResult, error) {
		v, err := r.GetValue(ctx, key, o.Read)
		if err != nil {
			return GetResult{}, err
		}
		a.node.Touch(r, key)
		a.node.CountRead(key, v.Found)
		if v, err = a.node.ReadThrough(ctx, r, key, v); err != nil {
			return GetResult{}, err
		}
		return GetResult{Value: v, Generation: r.Desc().GetGeneration()}, nil
	})
}

// Put sets key to value, with o.TTL.
func (a *API) Put(ctx context.Context, key, value []byte, o Options) error {
	validate := func() error {
		if err := a.CheckKey(key); err != nil {
			return err
		}
		if err := a.CheckValue(value); err != nil {
			return err
		}
		return a.node.CheckKeySpace(ctx, o.KeySpace, key)
	}
	_, err := Run(ctx, a, "put", validate, key, Growth(nil, &tidekvpb.WriteOp{Key: key, Value: value}), o.Replica, func(r *raftstore.Replica) (struct{}, error) {
		a.node.NoteWrite(ctx, r)
		_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_PUT, Key: key, Value: value, TtlMs: o.TTL.Milliseconds()}})
		if err != nil {
			return struct{}{}, err
		}
		a.node.Touch(r, key)
		return struct{}{}, nil
	})
	return err
}

// Delete removes key; it reports whether key held a value.
func (a *API) Delete(ctx context.Context, key []byte, o Options) (bool, error) {
	validate := func() error {
		if err := a.CheckKey(key); err != nil {
			return err
		}
		return a.node.CheckKeySpace(ctx, o.KeySpace, key)
	}
	return Run(ctx, a, "delete", validate, key, Growth(nil, &tidekvpb.WriteOp{Key: key}), o.Replica, func(r *raftstore.Replica) (bool, error) {
		a.node.NoteWrite(ctx, r)
		return r.Write(ctx, []*tidekvpb.WriteOp{{Kind: tidekvpb.WriteOp_DELETE, Key: key}})
	})
}

// ScanPage is one page of a Scan: pairs in key order, the key the next
// page starts at (nil: none) and the generation of the range that served
// it.
type ScanPage struct {
	KVs        []*tidekvpb.KeyValue
	Resume     []byte
	Generation uint64
}

// Scan reads the keys in [start, end) of the range holding start, at most
// limit of them (0: the node's maximum); hashOrder scans a hashed key
// space in the order it stores keys.
func (a *API) Scan(ctx context.Context, start, end []byte, limit int, hashOrder bool, o Options) (ScanPage, error) {
	l := a.limits
	validate := func() error {
		if len(start) > l.MaxKeySize || len(end) > l.MaxKeySize {
			return kverr.Invalid("scan bound exceeds the maximum key size of %d bytes", l.MaxKeySize)
		}
		if len(end) > 0 && bytes.Compare(start, end) >= 0 {
			return kverr.Invalid("invalid scan range: start %q is not before end %q", start, end)
		}
		if limit > l.MaxScanLimit {
			return kverr.Invalid("scan limit %d exceeds the maximum scan limit of %d", limit, l.MaxScanLimit)
		}
		var err error
		end, err = a.node.ScanEnd(ctx, o.KeySpace, start, end, hashOrder)
		return err
	}
	if limit == 0 {
		limit = l.MaxScanLimit
	}
	return Run(ctx, a, "scan", validate, start, 0, o.Replica, func(r *raftstore.Replica) (ScanPage, error) {
		kvs, resume, err := r.Scan(ctx, start, end, limit, l.MaxScanBytes, o.Read)
		if err != nil {
			return ScanPage{}, err
		}
		return ScanPage{KVs: kvs, Resume: resume, Generation: r.Desc().GetGeneration()}, nil
	})
}

// BatchGot is what a BatchGet found: one result per key, in order, and
// the generation of the range that served them.
type BatchGot struct {
	Results    []*tidekvpb.GetResponse
	Generation uint64
}

// BatchGet reads the values of ks, all in one range.
func (a *API) BatchGet(ctx context.Context, ks [][]byte, o Options) (BatchGot, error) {
	validate := func() error {
		if len(ks) == 0 {
			return kverr.Invalid("batch get needs at least one key")
		}
		if len(ks) > a.limits.MaxBatchKeys {
			return kverr.Invalid("batch of %d keys exceeds the maximum batch size of %d", len(ks), a.limits.MaxBatchKeys)
		}
		for _, key := range ks {
			if err := a.CheckKey(key); err != nil {
				return err
			}
		}
		return a.node.CheckKeySpace(ctx, o.KeySpace, ks[0], ks[1:]...)
	}
	var first []byte
	if len(ks) > 0 {
		first = ks[0]
	}
	return Run(ctx, a, "batch_get", validate, first, 0, o.Replica, func(r *raftstore.Replica) (BatchGot, error) {
		res, err := r.BatchGet(ctx, ks, o.Read)
		if err != nil {
			return BatchGot{}, err
		}
		a.node.Touch(r, ks[0], ks[1:]...)
		for i, g := range res {
			a.node.CountRead(ks[i], g.GetFound())
		}
		return BatchGot{Results: res, Generation: r.Desc().GetGeneration()}, nil
	})
}

// Write applies ops (puts and deletes of one range) atomically.
func (a *API) Write(ctx context.Context, ops []*tidekvpb.WriteOp, o Options) error {
	_, err := a.write(ctx, ops, nil, false, o)
	return err
}

// GuardedWrite applies ops atomically if g holds (g nil: always),
// clearing g's span first; wantExisted asks, per op, whether its key held
// a value.
func (a *API) GuardedWrite(ctx context.Context, ops []*tidekvpb.WriteOp, g *tidekvpb.WriteGuard, wantExisted bool, o Options) (*tidekvpb.WriteResponse, error) {
	return a.write(ctx, ops, g, wantExisted, o)
}

func (a *API) write(ctx context.Context, ops []*tidekvpb.WriteOp, g *tidekvpb.WriteGuard, wantExisted bool, o Options) (*tidekvpb.WriteResponse, error) {
	l := a.limits
	validate := func() error {
		if len(ops) == 0 {
			return kverr.Invalid("write needs at least one op")
		}
		if len(ops) > l.MaxBatchKeys {
			return kverr.Invalid("write of %d ops exceeds the maximum batch size of %d", len(ops), l.MaxBatchKeys)
		}
		total := 0
		for _, op := range ops {
			if err := a.CheckKey(op.GetKey()); err != nil {
				return err
			}
			if err := a.CheckValue(op.GetValue()); err != nil {
				return err
			}
			total += len(op.GetKey()) + len(op.GetValue())
		}
		if total > l.MaxWriteBytes {
			return kverr.Invalid("write of %d bytes is too large (the maximum write size is %d bytes)", total, l.MaxWriteBytes)
		}
		if err := a.checkGuard(g); err != nil {
			return err
		}
		ks := writeKeys(ops, g)
		return a.node.CheckKeySpace(ctx, o.KeySpace, ks[0], ks[1:]...)
	}
	var first []byte
	if len(ops) > 0 {
		first = ops[0].GetKey()
	}
	return Run(ctx, a, "write", validate, first, Growth(nil, ops...), o.Replica, func(r *raftstore.Replica) (*tidekvpb.WriteResponse, error) {
		d := r.Desc()
		ks := writeKeys(ops, g)
		for _, k := range ks {
			if !keys.Contains(d.GetStartKey(), d.GetEndKey(), k) {
				return nil, kverr.Invalid("write spans more than one range: key %q is outside range %d [%q, %q)", k, d.GetRangeId(), d.GetStartKey(), d.GetEndKey())
			}
		}
		if end := g.GetClearEnd(); len(end) > 0 && len(d.GetEndKey()) > 0 && bytes.Compare(end, d.GetEndKey()) > 0 {
			return nil, kverr.Invalid("write spans more than one range: its clear span ends at %q, past the end %q of range %d", end, d.GetEndKey(), d.GetRangeId())
		}
		a.node.NoteWrite(ctx, r)
		a.node.Touch(r, ks[0], ks[1:]...)
		if g == nil && !wantExisted {
			if _, err := r.Write(ctx, ops); err != nil {
				return nil, err
			}
			return &tidekvpb.WriteResponse{}, nil
		}
		return r.WriteGuarded(ctx, ops, g, wantExisted)
	})
}

// writeKeys are the keys a write touches that must lie in its range: the
// ops', the guard's and the start of its clear span.
func writeKeys(ops []*tidekvpb.WriteOp, g *tidekvpb.WriteGuard) [][]byte {
	ks := make([][]byte, 0, len(ops)+2)
	for _, op := range ops {
		ks = append(ks, op.GetKey())
	}
	if g != nil {
		ks = append(ks, g.GetKey())
		if len(g.GetClearStart()) > 0 {
			ks = append(ks, g.GetClearStart())
		}
	}
	return ks
}

// checkGuard validates a write's guard: a key, and a clear span that is
// either absent or a non-empty interval.
func (a *API) checkGuard(g *tidekvpb.WriteGuard) error {
	if g == nil {
		return nil
	}
	if err := a.CheckKey(g.GetKey()); err != nil {
		return err
	}
	if err := a.CheckValue(g.GetValue()); err != nil {
		return err
	}
	start, end := g.GetClearStart(), g.GetClearEnd()
	if len(start) == 0 && len(end) == 0 {
		return nil
	}
	if len(start) > a.limits.MaxKeySize || len(end) > a.limits.MaxKeySize {
		return kverr.Invalid("guard clear span exceeds the maximum key size of %d bytes", a.limits.MaxKeySize)
	}
	if len(start) == 0 || bytes.Compare(start, end) >= 0 {
		return kverr.Invalid("invalid guard clear span: start %q is not before end %q", start, end)
	}
	return nil
}

// CompareAndSet runs c (a replica's compare-and-set command; its key
// space is o.KeySpace).
func (a *API) CompareAndSet(ctx context.Context, c *tidekvpb.CompareAndSetRequest, o Options) (*tidekvpb.CompareAndSetResponse, error) {
	validate := func() error {
		if err := a.CheckKey(c.GetKey()); err != nil {
			return err
		}
		if err := a.CheckValue(c.GetNewValue()); err != nil {
			return err
		}
		return a.node.CheckKeySpace(ctx, o.KeySpace, c.GetKey())
	}
	// An increment is counted apart: it is one command that never loses to
	// a concurrent write, where a CAS loop's failed rounds are retries.
	op := "cas"
	if c.GetIncrement() {
		op = "incr"
	}
	return Run(ctx, a, op, validate, c.GetKey(), Growth(nil, &tidekvpb.WriteOp{Key: c.GetKey(), Value: c.GetNewValue()}), o.Replica, func(r *raftstore.Replica) (*tidekvpb.CompareAndSetResponse, error) {
		a.node.NoteWrite(ctx, r)
		a.node.Touch(r, c.GetKey())
		return r.CompareAndSet(ctx, c)
	})
}
