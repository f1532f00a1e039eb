package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// txView is one attempt of EXEC's transaction as a KV, so that the queued
// commands run through their usual code. It keeps the first error of the
// transaction (err): the attempt is then given up as a whole, the error
// being a conflict to retry, an overload or a refusal, never one command's
// reply. A GuardedWrite is refused (its callers read and write instead). A TTL is kept
// (KEEPTTL, INCR) or changed alone (the EXPIRE family, PERSIST) by
// writing the value read again with the expiry the read gave
// (Result.Expiry) or the new one: the read is the transaction's, so a
// change of the key before the commit makes it retry.
type txView struct {
	tx TxnKV
	// now is the clock TTLs read inside the transaction count to
	// (Config.Now).
	now func() time.Time
	err error
	// ready: lists pushed to, whose blocked clients are woken once the
	// transaction commits (blocked.go).
	ready [][]byte
}

// fail records err, the attempt's first failure, and returns it.
func (v *txView) fail(err error) error {
	if v.err == nil {
		v.err = err
	}
	return err
}

func (v *txView) Get(ctx context.Context, key []byte) ([]byte, error) {
	r, err := v.read(ctx, key)
	if err == nil && !r.Found {
		err = fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return r.Value, err
}

// read is a read of the transaction, with the key's version and expiry.
func (v *txView) read(ctx context.Context, key []byte) (Result, error) {
	r, err := v.tx.Get(ctx, key)
	if err != nil {
		return Result{}, v.fail(err)
	}
	return r, nil
}

func (v *txView) Put(ctx context.Context, key, value []byte) error {
	return v.put(ctx, key, value, Expiry{}, nil)
}

// put writes value with e's expiry. e.Keep keeps the key's current one,
// as cur, the key as the transaction read it, gives it (nil: read it now).
func (v *txView) put(ctx context.Context, key, value []byte, e Expiry, cur *Result) error {
	if e.Keep {
		if cur == nil {
			r, err := v.read(ctx, key)
			if err != nil {
				return err
			}
			cur = &r
		}
		e = cur.Expiry
	}
	var err error
	if e == (Expiry{}) {
		err = v.tx.Put(ctx, key, value)
	} else {
		err = v.tx.PutExpiring(ctx, key, value, e)
	}
	if err != nil {
		return v.fail(err)
	}
	return nil
}

// Delete reads the key first: DEL counts the keys it removed, and a
// transaction's delete does not say.
func (v *txView) Delete(ctx context.Context, key []byte) (bool, error) {
	_, err := v.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := v.tx.Delete(ctx, key); err != nil {
		return false, v.fail(err)
	}
	return true, nil
}

// readAll is a BatchGet of the transaction.
func (v *txView) readAll(ctx context.Context, keys [][]byte) ([]Result, error) {
	rs, err := v.tx.BatchGet(ctx, keys)
	if err != nil {
		return nil, v.fail(err)
	}
	return rs, nil
}

// readChunks reads keys in tx, at most per of them a BatchGet: a command
// naming thousands of keys (DEL, HSET, HDEL, MSETNX) reads them in
// len(keys)/per round trips to the transaction's coordinator, not one a
// key. Its callers pass Server.readBatch: no call asks more keys than a
// node takes in one request (MaxBatchKeys), nor more values of the
// largest size than MaxOutputBuffer holds, as an answer of 1,000 values
// of a MiB would not pass a node's 64 MiB gRPC message limit.
func readChunks(ctx context.Context, tx TxnKV, keys [][]byte, per int) ([]Result, error) {
	out := make([]Result, 0, len(keys))
	for chunk := range slices.Chunk(keys, per) {
		rs, err := tx.BatchGet(ctx, chunk)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// BatchGet reads keys in one call of the transaction, with each value's
// remaining TTL (TTL, PTTL, PERSIST, EXPIRE's conditions).
func (v *txView) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	out, err := v.readAll(ctx, keys)
	for i := range out {
		out[i].TTL = v.ttl(out[i].Expiry)
	}
	return out, err
}

// ttl is the remaining time to live of a value read with expiry e, in
// whole milliseconds rounded up as the store answers: the transaction's
// own put's TTL counts from the commit, so it is all left; a time counts
// to now, and one already past (the value was live at the transaction's
// read timestamp) leaves the least TTL there is.
func (v *txView) ttl(e Expiry) time.Duration {
	switch {
	case e.TTL > 0:
		return e.TTL
	case !e.At.IsZero():
		return max(e.At.Sub(v.now())+time.Millisecond-1, time.Millisecond).Truncate(time.Millisecond)
	}
	return 0
}

// Write applies MSET's puts, SET's with its expiry and EXPIRE's TTL
// changes one by one; the transaction makes them atomic.
func (v *txView) Write(ctx context.Context, ops []Op) error {
	for _, op := range ops {
		if _, err := v.apply(ctx, op); err != nil {
			return err
		}
	}
	return nil
}

// WriteEach serves EXPIRE and PERSIST (one SetTTL op).
func (v *txView) WriteEach(ctx context.Context, ops []Op) []OpResult {
	out := make([]OpResult, len(ops))
	for i, op := range ops {
		out[i].Existed, out[i].Err = v.apply(ctx, op)
	}
	return out
}

// apply is one op of a Write or WriteEach; for a delete or a SetTTL op it
// reports whether the key held a value. A SetTTL op writes the value
// again with its new expiry.
func (v *txView) apply(ctx context.Context, op Op) (bool, error) {
	switch {
	case op.Delete:
		return v.Delete(ctx, op.Key)
	case op.SetTTL:
		cur, err := v.read(ctx, op.Key)
		if err != nil || !cur.Found {
			return false, err
		}
		return true, v.put(ctx, op.Key, cur.Value, op.Expiry, &cur)
	}
	return false, v.put(ctx, op.Key, op.Value, op.Expiry, nil)
}

// CompareAndSet is a read and a write of the transaction, with e's expiry
// (Keep: the one read).
func (v *txView) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e Expiry) (bool, []byte, bool, error) {
	cur, err := v.read(ctx, key)
	if err != nil {
		return false, nil, false, err
	}
	if match := (expected == nil && !cur.Found) || (expected != nil && cur.Found && bytes.Equal(*expected, cur.Value)); !match {
		return false, cur.Value, cur.Found, nil
	}
	if newValue == nil {
		_, err = v.Delete(ctx, key)
	} else {
		err = v.put(ctx, key, *newValue, e, &cur)
	}
	return err == nil, cur.Value, cur.Found, err
}

// Scan is the transaction's: it sees the earlier commands' writes, and a
// change of the span read before the commit makes the attempt retry.
func (v *txView) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	kvs, err := v.tx.Scan(ctx, start, end, limit)
	if err != nil {
		return nil, v.fail(err)
	}
	return kvs, nil
}

// GuardedWrite is refused as one that spans ranges would be
// (ErrInvalidArgument, not the attempt's failure): its callers then take
// their path of reads and writes, which the transaction makes atomic.
func (v *txView) GuardedWrite(context.Context, []Op, Guard) (GuardResult, error) {
	return GuardResult{}, fmt.Errorf("%w: a guarded write inside a transaction", ErrInvalidArgument)
}

// Txn runs fn, a command's own transaction (a collection's change, MSET,
// RENAME), inside EXEC's, on a savepoint: fn's writes reach EXEC's
// transaction only if fn returns nil, so a command that fails (WRONGTYPE,
// a value out of range) writes nothing, as in Redis, and the others
// commit. A failure of the store fails the attempt (v.err).
func (v *txView) Txn(ctx context.Context, fn func(TxnKV) error) error {
	sp := &savepoint{v: v, writes: map[string]*[]byte{}, exps: map[string]Expiry{}}
	if err := fn(sp); err != nil {
		if v.err != nil {
			return v.err
		}
		return err
	}
	for _, k := range sp.order {
		var err error
		if val := sp.writes[k]; val == nil {
			err = v.tx.Delete(ctx, []byte(k))
		} else {
			err = v.put(ctx, []byte(k), *val, sp.exps[k], nil)
		}
		if err != nil {
			return v.fail(err)
		}
	}
	return nil
}

// savepoint is one command's writes inside EXEC, kept until it succeeds
// (txView.Txn); its reads see them over the transaction's.
type savepoint struct {
	v      *txView
	writes map[string]*[]byte // nil: deleted
	exps   map[string]Expiry  // of the puts in writes
	order  []string           // the keys of writes, first written first
}

func (s *savepoint) Get(ctx context.Context, key []byte) (Result, error) {
	if val, ok := s.writes[string(key)]; ok {
		if val == nil {
			return Result{}, nil
		}
		return Result{Value: *val, Found: true, Expiry: s.exps[string(key)]}, nil
	}
	return s.v.read(ctx, key)
}

// BatchGet reads the keys the savepoint did not write in one call of the
// transaction.
func (s *savepoint) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	return readRest(ctx, keys, func(k []byte) (Result, bool) {
		if _, ok := s.writes[string(k)]; !ok {
			return Result{}, false
		}
		r, _ := s.Get(ctx, k)
		return r, true
	}, s.v.readAll)
}

// readRest answers each of keys known answers (ok), and the rest with
// one call of read.
func readRest(ctx context.Context, keys [][]byte, known func(k []byte) (Result, bool), read func(context.Context, [][]byte) ([]Result, error)) ([]Result, error) {
	out := make([]Result, len(keys))
	var ask [][]byte
	var at []int
	for i, k := range keys {
		var ok bool
		if out[i], ok = known(k); !ok {
			ask, at = append(ask, k), append(at, i)
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	rs, err := read(ctx, ask)
	if err != nil {
		return nil, err
	}
	for j, r := range rs {
		out[at[j]] = r
	}
	return out, nil
}

func (s *savepoint) Put(ctx context.Context, key, value []byte) error {
	return s.PutExpiring(ctx, key, value, Expiry{})
}

func (s *savepoint) PutExpiring(_ context.Context, key, value []byte, e Expiry) error {
	if e.Keep {
		return fmt.Errorf("%w: a transaction cannot keep %q's TTL", ErrInvalidArgument, key)
	}
	v := append([]byte{}, value...) // not nil: an empty value is a value
	s.keep(key, &v)
	s.exps[string(key)] = e
	return nil
}

func (s *savepoint) Delete(_ context.Context, key []byte) error {
	s.keep(key, nil)
	return nil
}

// keep records a write of key (value nil: a delete).
func (s *savepoint) keep(key []byte, value *[]byte) {
	if _, ok := s.writes[string(key)]; !ok {
		s.order = append(s.order, string(key))
	}
	s.writes[string(key)] = value
}

// Scan reads the transaction's span and lays the savepoint's writes over
// it; while the savepoint's deletes leave fewer than limit pairs of a full
// read, it reads on. Each read asks for limit plus the savepoint's
// deletes, as the coordinator asks the ranges: one read answers, however
// many keys the command deleted (HDEL of thousands of fields then asking
// whether one is left read one key a pass).
func (s *savepoint) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	ask := limit
	for _, v := range s.writes {
		if v == nil && limit > 0 {
			ask++
		}
	}
	var read []KeyValue
	for from := start; ; {
		kvs, err := s.v.Scan(ctx, from, end, ask)
		if err != nil {
			return nil, err
		}
		read = append(read, kvs...)
		if ask <= 0 || len(kvs) < ask {
			return overlay(read, s.writes, start, end, limit), nil
		}
		// More may follow the last key read: the savepoint's keys past
		// it wait for the next read, as those keys do.
		from = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
		if out := overlay(read, s.writes, start, from, limit); len(out) == limit {
			return out, nil
		}
	}
}

// inSpan reports whether key lies in [start, end) (empty end: no bound).
func inSpan(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && (len(end) == 0 || bytes.Compare(key, end) < 0)
}

// overlay lays writes not yet applied (nil: deleted) over kvs, a scan of
// [start, end) in key order, and keeps at most limit pairs (<= 0: all).
func overlay(kvs []KeyValue, writes map[string]*[]byte, start, end []byte, limit int) []KeyValue {
	out := make([]KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		if _, ok := writes[string(kv.Key)]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range writes {
		if v != nil && inSpan([]byte(k), start, end) {
			out = append(out, KeyValue{Key: []byte(k), Value: *v})
		}
	}
	slices.SortFunc(out, func(a, b KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}
