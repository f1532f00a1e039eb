package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// txView is one attempt of EXEC's transaction as a KV, so that the queued
// commands run through their usual code. It keeps the first error of the
// transaction (err): the attempt is then given up as a whole, the error
// being a conflict to retry, an overload or a refusal, never one command's
// reply. Only what inMulti's commands call is served.
type txView struct {
	tx  TxnKV
	err error
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

// read is a read of the transaction, with the key's version.
func (v *txView) read(ctx context.Context, key []byte) (Result, error) {
	r, err := v.tx.Get(ctx, key)
	if err != nil {
		return Result{}, v.fail(err)
	}
	return r, nil
}

func (v *txView) Put(ctx context.Context, key, value []byte) error {
	return v.put(ctx, key, value, Expiry{})
}

// put writes value with e's expiry; e.Keep is dropped (INCR's): a
// transaction cannot keep a TTL, so it clears it (docs/transactions.md),
// and SET KEEPTTL is refused at MULTI.
func (v *txView) put(ctx context.Context, key, value []byte, e Expiry) error {
	var err error
	if e.Keep || e == (Expiry{}) {
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

// BatchGet reads key by key: a transaction reads one key a call.
func (v *txView) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	out := make([]Result, len(keys))
	for i, k := range keys {
		r, err := v.read(ctx, k)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// Write applies MSET's puts one by one; the transaction makes them atomic.
func (v *txView) Write(ctx context.Context, ops []Op) error {
	for _, op := range ops {
		var err error
		switch {
		case op.SetTTL || op.Expiry.Keep:
			err = v.fail(unsupported("keeping or changing only a TTL"))
		case op.Delete:
			_, err = v.Delete(ctx, op.Key)
		default:
			err = v.put(ctx, op.Key, op.Value, op.Expiry)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CompareAndSet is a read and a write of the transaction, with e's expiry
// (INCR's KEEPTTL cannot be kept: see put).
func (v *txView) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e Expiry) (bool, []byte, bool, error) {
	cur, err := v.Get(ctx, key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, nil, false, err
	}
	exists := err == nil
	if match := (expected == nil && !exists) || (expected != nil && exists && bytes.Equal(*expected, cur)); !match {
		return false, cur, exists, nil
	}
	if newValue == nil {
		_, err = v.Delete(ctx, key)
	} else {
		err = v.put(ctx, key, *newValue, e)
	}
	return err == nil, cur, exists, err
}

// Scan answers ErrUnordered, which DEL takes for "no hash fields to
// clear": a transaction cannot scan yet, so a hash deleted inside EXEC
// leaves its fields behind as unreachable garbage (as SET over a hash
// does), which the next HSET creating it removes.
func (v *txView) Scan(context.Context, []byte, []byte, int) ([]KeyValue, error) {
	return nil, fmt.Errorf("%w: no scans inside a transaction", ErrUnordered)
}

func (v *txView) GuardedWrite(context.Context, []Op, Guard) (GuardResult, error) {
	return GuardResult{}, v.fail(unsupported("a guarded write"))
}

func (v *txView) WriteEach(_ context.Context, ops []Op) []OpResult {
	out := make([]OpResult, len(ops))
	for i := range out {
		out[i].Err = v.fail(unsupported("WriteEach"))
	}
	return out
}

func (v *txView) Txn(context.Context, func(TxnKV) error) error {
	return v.fail(unsupported("a nested transaction"))
}

// unsupported is the error of a call no command of inMulti makes.
func unsupported(what string) error {
	return fmt.Errorf("%w: %s inside a transaction", ErrInvalidArgument, what)
}
