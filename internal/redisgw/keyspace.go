package redisgw

import (
	"context"
	"errors"
	"fmt"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/resp"
)

// keySpaceKV is the Redis front end's KV of one key space (SELECT n reaches
// key space number n): it maps the commands' keys into the key space and
// scan results back, and gives puts without an expiry the key space's
// default TTL. A hashed key space cannot scan (KEYS, SCAN) nor hold hashes,
// whose fields a hash would scatter over ranges.
type keySpaceKV struct {
	kv resp.KV
	ks ksconfig.KeySpace
	c  keyspace.Codec
}

// in names the key space in the requests made with ctx (the routing
// client and the in-process path put it in each request).
func (k *keySpaceKV) in(ctx context.Context) context.Context {
	return keyspace.WithName(ctx, k.ks.Name)
}

// InKeySpace is kv as the Redis front end's KV of key space ks.
func InKeySpace(kv resp.KV, ks ksconfig.KeySpace) resp.KV {
	return &keySpaceKV{kv: kv, ks: ks, c: ks.Codec()}
}

// Databases maps SELECT n to key space number n, found by byID.
func Databases(kv resp.KV, byID func(context.Context, keyspace.ID) (ksconfig.KeySpace, error)) resp.Databases {
	return func(ctx context.Context, n int) (resp.KV, error) {
		if int64(n) > int64(^keyspace.ID(0)) {
			return nil, fmt.Errorf("DB index is out of range (no key space number %d)", n)
		}
		ks, err := byID(ctx, keyspace.ID(n))
		if err != nil {
			return nil, fmt.Errorf("DB index is out of range (%v)", err)
		}
		return InKeySpace(kv, ks), nil
	}
}

func (k *keySpaceKV) unordered() error {
	return fmt.Errorf("%w: key space %q is hashed: its keys are placed by hash, so it has no order to scan and holds no hashes (use an ordered key space)", resp.ErrUnordered, k.ks.Name)
}

func (k *keySpaceKV) expiry(e resp.Expiry) resp.Expiry {
	if e == (resp.Expiry{}) {
		e.TTL = k.ks.TTL
	}
	return e
}

func (k *keySpaceKV) ops(ops []resp.Op) []resp.Op {
	out := make([]resp.Op, len(ops))
	for i, op := range ops {
		out[i] = op
		out[i].Key = k.c.Encode(op.Key)
		if !op.Delete && !op.SetTTL {
			out[i].Expiry = k.expiry(op.Expiry)
		}
	}
	return out
}

func (k *keySpaceKV) Get(ctx context.Context, key []byte) ([]byte, error) {
	return k.kv.Get(k.in(ctx), k.c.Encode(key))
}

func (k *keySpaceKV) Put(ctx context.Context, key, value []byte) error {
	if k.ks.TTL > 0 {
		return k.kv.Write(k.in(ctx), k.ops([]resp.Op{{Key: key, Value: value}}))
	}
	return k.kv.Put(k.in(ctx), k.c.Encode(key), value)
}

func (k *keySpaceKV) Delete(ctx context.Context, key []byte) (bool, error) {
	return k.kv.Delete(k.in(ctx), k.c.Encode(key))
}

func (k *keySpaceKV) BatchGet(ctx context.Context, keys [][]byte) ([]resp.Result, error) {
	enc := make([][]byte, len(keys))
	for i, key := range keys {
		enc[i] = k.c.Encode(key)
	}
	return k.kv.BatchGet(k.in(ctx), enc)
}

func (k *keySpaceKV) Write(ctx context.Context, ops []resp.Op) error {
	return k.kv.Write(k.in(ctx), k.ops(ops))
}

func (k *keySpaceKV) WriteEach(ctx context.Context, ops []resp.Op) []resp.OpResult {
	return k.kv.WriteEach(k.in(ctx), k.ops(ops))
}

func (k *keySpaceKV) GuardedWrite(ctx context.Context, ops []resp.Op, g resp.Guard) (resp.GuardResult, error) {
	if k.ks.Mode == keyspace.Hashed {
		return resp.GuardResult{}, k.unordered()
	}
	g.Key = k.c.Encode(g.Key)
	if len(g.ClearStart) > 0 {
		g.ClearStart, g.ClearEnd = k.c.EncodeSpan(g.ClearStart, g.ClearEnd)
	}
	return k.kv.GuardedWrite(k.in(ctx), k.ops(ops), g)
}

func (k *keySpaceKV) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e resp.Expiry) (bool, []byte, bool, error) {
	if newValue != nil {
		e = k.expiry(e)
	}
	return k.kv.CompareAndSet(k.in(ctx), k.c.Encode(key), expected, newValue, e)
}

// Increment maps key into the key space; a KV without increments is
// errors.ErrUnsupported, as the Gateway's before every node has them.
func (k *keySpaceKV) Increment(ctx context.Context, key []byte, by int64, e resp.Expiry) (bool, []byte, bool, error) {
	inc, ok := k.kv.(resp.Incrementer)
	if !ok {
		return false, nil, false, fmt.Errorf("%w: the key space's KV has no increments", errors.ErrUnsupported)
	}
	return inc.Increment(k.in(ctx), k.c.Encode(key), by, k.expiry(e))
}

// SetPositions is the cluster's answer whatever the key space; a KV that
// does not say gets the older layouts.
func (k *keySpaceKV) SetPositions() bool {
	p, ok := k.kv.(resp.SetPositioner)
	return ok && p.SetPositions()
}

func (k *keySpaceKV) Scan(ctx context.Context, start, end []byte, limit int) ([]resp.KeyValue, error) {
	if k.ks.Mode == keyspace.Hashed {
		return nil, k.unordered()
	}
	lo, hi := k.c.EncodeSpan(start, end)
	kvs, err := k.kv.Scan(k.in(ctx), lo, hi, limit)
	return k.decode(kvs), err
}

// decode maps a scan's keys back into the key space, in place.
func (k *keySpaceKV) decode(kvs []resp.KeyValue) []resp.KeyValue {
	out := kvs[:0]
	for _, kv := range kvs {
		if key, ok := k.c.Decode(kv.Key); ok {
			out = append(out, resp.KeyValue{Key: key, Value: kv.Value})
		}
	}
	return out
}

// Txn runs MULTI/EXEC in the key space: the transaction names it (its
// coordinator checks the keys against it, as the KV service checks a
// request's), the keys are mapped as the other commands' are, and puts
// without an expiry get the key space's default TTL.
func (k *keySpaceKV) Txn(ctx context.Context, fn func(resp.TxnKV) error) error {
	return k.kv.Txn(k.in(ctx), func(tx resp.TxnKV) error { return fn(keySpaceTx{tx: tx, k: k}) })
}

// keySpaceTx is one attempt of a transaction in k's key space.
type keySpaceTx struct {
	tx resp.TxnKV
	k  *keySpaceKV
}

func (t keySpaceTx) Get(ctx context.Context, key []byte) (resp.Result, error) {
	return t.tx.Get(ctx, t.k.c.Encode(key))
}

func (t keySpaceTx) BatchGet(ctx context.Context, keys [][]byte) ([]resp.Result, error) {
	enc := make([][]byte, len(keys))
	for i, k := range keys {
		enc[i] = t.k.c.Encode(k)
	}
	return t.tx.BatchGet(ctx, enc)
}

func (t keySpaceTx) Put(ctx context.Context, key, value []byte) error {
	return t.PutExpiring(ctx, key, value, resp.Expiry{})
}

// PutExpiring gives a put without an expiry the key space's TTL, if it
// has one.
func (t keySpaceTx) PutExpiring(ctx context.Context, key, value []byte, e resp.Expiry) error {
	if e = t.k.expiry(e); e == (resp.Expiry{}) {
		return t.tx.Put(ctx, t.k.c.Encode(key), value)
	}
	return t.tx.PutExpiring(ctx, t.k.c.Encode(key), value, e)
}

func (t keySpaceTx) Delete(ctx context.Context, key []byte) error {
	return t.tx.Delete(ctx, t.k.c.Encode(key))
}

// Scan is keySpaceKV.Scan's inside the transaction; a hashed key space
// runs no transactions.
func (t keySpaceTx) Scan(ctx context.Context, start, end []byte, limit int) ([]resp.KeyValue, error) {
	if t.k.ks.Mode == keyspace.Hashed {
		return nil, t.k.unordered()
	}
	lo, hi := t.k.c.EncodeSpan(start, end)
	kvs, err := t.tx.Scan(ctx, lo, hi, limit)
	return t.k.decode(kvs), err
}
