package keyspaces

import (
	"context"
	"errors"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Read-through (docs/keyspaces.md): a point read that misses in a key
// space with a miss handler asks the handler for the value, writes it with
// the key space's TTL through Raft if the key is still absent, and answers
// it (or the value a write stored meanwhile). Only the
// leaseholder does (it is the one that can write); one fetch per key is in
// flight however many reads miss it (cache.Flights), a flight first looks
// again for a value the one before it stored, and at most Cache.MaxFetches
// fetches run per node.

// ReadThrough returns v, or when v is a miss of a key (stored key key)
// in a key space with a miss handler, what the handler answers.
func (sp *Spaces) ReadThrough(ctx context.Context, r *raftstore.Replica, key []byte, v raftstore.Value) (raftstore.Value, error) {
	if v.Found || !r.IsLeader() {
		return v, nil
	}
	ks, ok := sp.Catalogue().ByID(keyspace.Of(key))
	if !ok || ks.MissHandler == "" {
		return v, nil
	}
	user, _ := ks.Codec().Decode(key)
	val, found, err := sp.flights.Do(ctx, string(key), func(ctx context.Context) ([]byte, bool, error) {
		// A read that missed just before the previous flight for the key
		// stored its value starts a new flight: the value is there now.
		if cur, err := r.GetValue(ctx, key, raftstore.ReadOptions{}); err == nil && cur.Found {
			return cur.Value, true, nil
		}
		val, found, err := sp.node.Fetch(ctx, ks.MissHandler, user)
		if err != nil || !found {
			return nil, false, err
		}
		// Only if the key is still absent: a client's write that landed
		// while the origin answered is newer than the origin's value.
		req := &tidekvpb.CompareAndSetRequest{Key: key, NewValue: val, TtlMs: ks.TTL.Milliseconds()}
		resp, err := r.CompareAndSet(ctx, req)
		var moved *raftstore.KeyMismatchError
		if errors.As(err, &moved) {
			// The range split while the origin answered: store the value
			// in the replica that holds the key now, or the readers'
			// retries would each ask the origin again.
			if now := sp.node.LookupKey(key); now != nil && now != r {
				resp, err = now.CompareAndSet(ctx, req)
			}
		}
		if err == nil && !resp.GetSucceeded() {
			return resp.GetCurrentValue(), resp.GetCurrentExists(), nil
		}
		return val, true, err
	})
	if err != nil || !found {
		return v, err
	}
	return raftstore.Value{Value: val, Found: true, TTL: ks.TTL}, nil
}
