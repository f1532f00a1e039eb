package keyspaces

import (
	"context"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Read-through (docs/keyspaces.md): a point read that misses in a key
// space with a miss handler asks the handler for the value, writes it with
// the key space's TTL through Raft if the key is still absent, and answers
// it (or the value a write stored meanwhile). Only the
// leaseholder does (it is the one that can write); one fetch per key is in
// flight however many reads miss it (cache.Flights), and at most
// Cache.MaxFetches per node.

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
		val, found, err := sp.node.Fetch(ctx, ks.MissHandler, user)
		if err != nil || !found {
			return nil, false, err
		}
		// Only if the key is still absent: a client's write that landed
		// while the origin answered is newer than the origin's value.
		resp, err := r.CompareAndSet(ctx, &tidekvpb.CompareAndSetRequest{Key: key, NewValue: val, TtlMs: ks.TTL.Milliseconds()})
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
