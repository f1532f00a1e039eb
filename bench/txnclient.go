package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/tidekv/tidekv/client"
)

// ClientTxnStore adapts Go clients of one cluster to TxnStore: transactions
// take the clients in turn (clients placed in different regions spread
// the transactions' coordinators over them), everything else goes through
// the first.
func ClientTxnStore(clients ...*client.Client) TxnStore {
	return &clientStore{cs: clients}
}

type clientStore struct {
	cs   []*client.Client
	next atomic.Uint64
}

func (s *clientStore) Txn(ctx context.Context, fn func(tx TxnOps) error) error {
	c := s.cs[int(s.next.Add(1)%uint64(len(s.cs)))]
	err := c.Txn(ctx, func(tx *client.Tx) error { return fn(tx) })
	if errors.Is(err, client.ErrTxnRetry) {
		return fmt.Errorf("%w: %w", ErrTxnConflict, err)
	}
	return err
}

func (s *clientStore) Put(ctx context.Context, key, value []byte) error {
	return s.cs[0].Put(ctx, key, value)
}

func (s *clientStore) Delete(ctx context.Context, key []byte) error {
	_, err := s.cs[0].Delete(ctx, key)
	return err
}

func (s *clientStore) SnapshotScan(ctx context.Context, start, end []byte) ([]KeyValue, string, error) {
	kvs, at, err := s.cs[0].SnapshotScan(ctx, start, end, 0)
	out := make([]KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = KeyValue{Key: kv.Key, Value: kv.Value}
	}
	return out, at.String(), err
}

// Split leaves a key that already starts a range alone (a run before this
// one split there): the server refuses to split there again.
func (s *clientStore) Split(ctx context.Context, key []byte) error {
	resp, err := s.cs[0].Ranges(ctx)
	if err != nil {
		return err
	}
	for _, r := range resp.GetRanges() {
		if string(r.GetDesc().GetStartKey()) == string(key) {
			return nil
		}
	}
	_, err = s.cs[0].Split(ctx, key)
	return err
}
