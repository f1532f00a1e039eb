package resp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tidekv/tidekv/client"
)

// FromClient adapts the TideKV Go client to KV, so that the RESP front end
// takes the same path as gRPC requests (routing, read modes, limits,
// admission control). Client errors are wrapped with this package's
// sentinels (see mapErr).
func FromClient(c *client.Client) KV { return clientKV{c} }

type clientKV struct{ c *client.Client }

// mapErr wraps client errors with this package's sentinels. An invalid
// argument keeps only the client's reason (its message less the client's
// own sentinel), so the reply names "invalid argument" once.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, client.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, client.ErrInvalidArgument):
		return fmt.Errorf("%w: %s", ErrInvalidArgument, strings.TrimPrefix(err.Error(), client.ErrInvalidArgument.Error()+": "))
	case errors.Is(err, client.ErrOverloaded):
		return fmt.Errorf("%w: %w", ErrOverloaded, err)
	case errors.Is(err, client.ErrAmbiguous):
		return fmt.Errorf("%w: %w", ErrAmbiguous, err)
	case errors.Is(err, client.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
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

func (a clientKV) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	rs, err := a.c.BatchGet(ctx, keys)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]Result, len(rs))
	for i, r := range rs {
		out[i] = Result{Value: r.Value, Found: r.Found}
	}
	return out, nil
}

func (a clientKV) Write(ctx context.Context, ops []Op) error {
	cops := make([]client.Op, len(ops))
	for i, op := range ops {
		cops[i] = client.Op{Key: op.Key, Value: op.Value, Delete: op.Delete}
	}
	return mapErr(a.c.Write(ctx, cops))
}

func (a clientKV) GuardedWrite(ctx context.Context, ops []Op, g Guard) (GuardResult, error) {
	cops := make([]client.Op, len(ops))
	for i, op := range ops {
		cops[i] = client.Op{Key: op.Key, Value: op.Value, Delete: op.Delete}
	}
	r, err := a.c.WriteGuarded(ctx, cops, client.Guard{Key: g.Key, Value: g.Value, ClearStart: g.ClearStart, ClearEnd: g.ClearEnd})
	return GuardResult{Failed: r.GuardFailed, Existed: r.Existed}, mapErr(err)
}

func (a clientKV) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte) (bool, []byte, bool, error) {
	ok, cur, exists, err := a.c.CompareAndSet(ctx, key, expected, newValue)
	return ok, cur, exists, mapErr(err)
}

func (a clientKV) Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	kvs, err := a.c.Scan(ctx, start, end, limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = KeyValue{Key: kv.Key, Value: kv.Value}
	}
	return out, nil
}

// WriteEach sends the ops one by one: the client has no per-op batch call,
// and a Write would make them atomic and fail them together.
func (a clientKV) WriteEach(ctx context.Context, ops []Op) []OpResult {
	return writeEachByOne(ctx, a, ops)
}
