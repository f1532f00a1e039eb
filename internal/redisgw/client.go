package redisgw

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/resp"
)

// FromClient adapts the TideKV Go client to resp.KV, so that the RESP
// front end takes the same path as gRPC requests (routing, read modes,
// limits, admission control). Client errors are wrapped with resp's
// sentinels (see mapErr).
func FromClient(c *client.Client) resp.KV { return clientKV{c} }

type clientKV struct{ c *client.Client }

// mapErr wraps TideKV's errors (api/kverr's vocabulary, which the client
// speaks) with resp's sentinels. An invalid argument keeps only the
// client's reason (its message less the client's own sentinel), so the
// reply names "invalid argument" once. Ambiguity
// wins over the overload it may wrap (a transaction's commit that ended
// "overloaded"): "retry" would be wrong if the write was applied.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kverr.ErrNotFound):
		return fmt.Errorf("%w: %w", resp.ErrNotFound, err)
	case errors.Is(err, kverr.ErrInvalidArgument):
		return fmt.Errorf("%w: %s", resp.ErrInvalidArgument, strings.TrimPrefix(err.Error(), kverr.ErrInvalidArgument.Error()+": "))
	case errors.Is(err, kverr.ErrAmbiguous):
		return fmt.Errorf("%w: %w", resp.ErrAmbiguous, err)
	case errors.Is(err, kverr.ErrOverloaded):
		if oe := (*client.OverloadedError)(nil); errors.As(err, &oe) {
			return &resp.OverloadedError{RetryAfter: oe.RetryAfter}
		}
		return fmt.Errorf("%w: %w", resp.ErrOverloaded, err)
	case errors.Is(err, kverr.ErrUnavailable):
		return fmt.Errorf("%w: %w", resp.ErrUnavailable, err)
	}
	return err
}

func (a clientKV) Get(ctx context.Context, key []byte) ([]byte, error) {
	v, err := a.c.Get(ctx, key)
	return v, mapErr(err)
}

func (a clientKV) Put(ctx context.Context, key, value []byte) error {
	return mapErr(a.c.Put(ctx, key, value))
}

func (a clientKV) Delete(ctx context.Context, key []byte) (bool, error) {
	ok, err := a.c.Delete(ctx, key)
	return ok, mapErr(err)
}

func (a clientKV) BatchGet(ctx context.Context, keys [][]byte) ([]resp.Result, error) {
	rs, err := a.c.BatchGet(ctx, keys)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]resp.Result, len(rs))
	for i, r := range rs {
		out[i] = resp.Result{Value: r.Value, Found: r.Found, TTL: r.TTL, Version: resp.Version(r.Version)}
	}
	return out, nil
}

// clientOps are ops as the client takes them.
func clientOps(ops []resp.Op) []client.Op {
	cops := make([]client.Op, len(ops))
	for i, op := range ops {
		cops[i] = client.Op{Key: op.Key, Value: op.Value, Delete: op.Delete, SetTTL: op.SetTTL,
			Expiry: client.Expiry(op.Expiry)}
	}
	return cops
}

func (a clientKV) Write(ctx context.Context, ops []resp.Op) error {
	return mapErr(a.c.Write(ctx, clientOps(ops)))
}

func (a clientKV) GuardedWrite(ctx context.Context, ops []resp.Op, g resp.Guard) (resp.GuardResult, error) {
	r, err := a.c.WriteGuarded(ctx, clientOps(ops), client.Guard{Key: g.Key, Value: g.Value, ClearStart: g.ClearStart, ClearEnd: g.ClearEnd})
	return resp.GuardResult{Failed: r.GuardFailed, Existed: r.Existed}, mapErr(err)
}

func (a clientKV) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e resp.Expiry) (bool, []byte, bool, error) {
	ok, cur, exists, err := a.c.CompareAndSetTTL(ctx, key, expected, newValue, client.Expiry(e))
	return ok, cur, exists, mapErr(err)
}

func (a clientKV) Increment(ctx context.Context, key []byte, by int64, e resp.Expiry) (bool, []byte, bool, error) {
	ok, before, existed, err := a.c.Increment(ctx, key, by, client.Expiry(e))
	return ok, before, existed, mapErr(err)
}

func (a clientKV) Scan(ctx context.Context, start, end []byte, limit int) ([]resp.KeyValue, error) {
	kvs, err := a.c.Scan(ctx, start, end, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]resp.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = resp.KeyValue{Key: kv.Key, Value: kv.Value}
	}
	return out, nil
}

// WriteEach sends the ops of each range as one Write (client.WriteEach):
// one round trip and one proposal per range. A Write the node refused as
// invalid applied nothing; its ops are then sent one by one, so that the
// invalid op fails alone as the resp.KV contract says.
func (a clientKV) WriteEach(ctx context.Context, ops []resp.Op) []resp.OpResult {
	out := make([]resp.OpResult, len(ops))
	var redo []int
	for i, r := range a.c.WriteEach(ctx, clientOps(ops)) {
		if errors.Is(r.Err, client.ErrInvalidArgument) {
			redo = append(redo, i)
			continue
		}
		out[i] = resp.OpResult{Existed: r.Existed, Err: mapErr(r.Err)}
	}
	a.eachOnItsOwn(ctx, ops, redo, out)
	return out
}

// eachOnItsOwn sends ops[idx] each as its own Put, Delete or Expire. Ops on
// different keys go concurrently, at most maxConcurrentOps at a time; the
// ops on one key go one after another, in order.
func (a clientKV) eachOnItsOwn(ctx context.Context, ops []resp.Op, idx []int, out []resp.OpResult) {
	byKey := map[string][]int{}
	var order []string
	for _, i := range idx {
		op := ops[i]
		if _, ok := byKey[string(op.Key)]; !ok {
			order = append(order, string(op.Key))
		}
		byKey[string(op.Key)] = append(byKey[string(op.Key)], i)
	}
	sem := make(chan struct{}, maxConcurrentOps)
	var wg sync.WaitGroup
	for _, k := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func(idx []int) {
			defer func() { <-sem; wg.Done() }()
			for _, i := range idx {
				out[i] = a.writeOne(ctx, ops[i])
			}
		}(byKey[k])
	}
	wg.Wait()
}

func (a clientKV) writeOne(ctx context.Context, op resp.Op) resp.OpResult {
	var r resp.OpResult
	switch {
	case op.Delete:
		r.Existed, r.Err = a.c.Delete(ctx, op.Key)
	case op.SetTTL:
		r.Existed, r.Err = a.c.Expire(ctx, op.Key, client.Expiry(op.Expiry))
	case op.Expiry != (resp.Expiry{}):
		r.Err = a.c.Write(ctx, clientOps([]resp.Op{op}))
	default:
		r.Err = a.c.Put(ctx, op.Key, op.Value)
	}
	r.Err = mapErr(r.Err)
	return r
}

// maxConcurrentOps bounds the calls one WriteEach has in flight.
const maxConcurrentOps = 64

// Txn runs fn with client.Txn, whose retries of conflicts (ErrTxnRetry)
// are the only ones: fn gets each attempt's Tx.
func (a clientKV) Txn(ctx context.Context, fn func(tx resp.TxnKV) error) error {
	return mapErr(a.c.Txn(ctx, func(tx *client.Tx) error { return fn(clientTx{tx}) }))
}

// clientTx is a client.Tx as a resp.TxnKV; its errors are mapped like the
// other calls', so a refusal reads the same inside EXEC as outside.
type clientTx struct{ tx *client.Tx }

func (t clientTx) Get(ctx context.Context, key []byte) (resp.Result, error) {
	r, err := t.tx.GetVersion(ctx, key)
	return txResult(r), mapErr(err)
}

// txResult is a transaction's read as resp's.
func txResult(r client.GetResult) resp.Result {
	return resp.Result{Value: r.Value, Found: r.Found, Version: resp.Version(r.Version), Expiry: resp.Expiry(r.Expiry)}
}

func (t clientTx) BatchGet(ctx context.Context, keys [][]byte) ([]resp.Result, error) {
	rs, err := t.tx.BatchGet(ctx, keys)
	out := make([]resp.Result, len(rs))
	for i, r := range rs {
		out[i] = txResult(r)
	}
	return out, mapErr(err)
}

func (t clientTx) Put(ctx context.Context, key, value []byte) error {
	return mapErr(t.tx.Put(ctx, key, value))
}

func (t clientTx) PutExpiring(ctx context.Context, key, value []byte, e resp.Expiry) error {
	return mapErr(t.tx.PutExpiring(ctx, key, value, client.Expiry{TTL: e.TTL, At: e.At, Keep: e.Keep}))
}

func (t clientTx) Delete(ctx context.Context, key []byte) error {
	return mapErr(t.tx.Delete(ctx, key))
}

// Scan takes resp's "no start" (empty: no key is empty, so the first key
// is at or after "\x00") and "no limit" (any limit <= 0) in the client's
// terms.
func (t clientTx) Scan(ctx context.Context, start, end []byte, limit int) ([]resp.KeyValue, error) {
	if len(start) == 0 {
		start = []byte{0}
	}
	kvs, err := t.tx.Scan(ctx, start, end, max(limit, 0))
	out := make([]resp.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = resp.KeyValue{Key: kv.Key, Value: kv.Value}
	}
	return out, mapErr(err)
}
