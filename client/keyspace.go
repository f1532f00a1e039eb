package client

import (
	"context"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// CreateKeySpace creates a named key space (docs/keyspaces.md) and returns
// it with its number. Unset mode and engine take their defaults (ordered,
// pebble); invalid settings or a name in use are an error wrapping
// ErrInvalidArgument, and nothing is created.
func (c *Client) CreateKeySpace(ctx context.Context, ks *tidekvpb.KeySpace) (*tidekvpb.KeySpace, error) {
	req := &tidekvpb.CreateKeySpaceRequest{Keyspace: ks}
	var resp *tidekvpb.CreateKeySpaceResponse
	err := c.invoke(ctx, &rpc{op: "create key space", anyNode: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.CreateKeySpace(ctx, req)
			return err
		}})
	return resp.GetKeyspace(), err
}

// StageKeySpace creates a key space under its staging name
// (keyspace.StagingName), which no reader asks for, until
// PublishKeySpaces gives it its name: a restore writes into it there
// (KeySpace of the staging name).
func (c *Client) StageKeySpace(ctx context.Context, ks *tidekvpb.KeySpace) (*tidekvpb.KeySpace, error) {
	req := &tidekvpb.CreateKeySpaceRequest{Keyspace: ks, Staged: true}
	var resp *tidekvpb.CreateKeySpaceResponse
	err := c.invoke(ctx, &rpc{op: "stage key space", anyNode: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.CreateKeySpace(ctx, req)
			return err
		}})
	return resp.GetKeyspace(), err
}

// PublishKeySpaces gives staged key spaces their names, all in one change
// of the meta range: a reader finds each either absent or with all that
// was written into it.
func (c *Client) PublishKeySpaces(ctx context.Context, names []string) error {
	return c.invoke(ctx, &rpc{op: "publish key spaces", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) error {
			_, err := nc.admin.PublishKeySpaces(ctx, &tidekvpb.PublishKeySpacesRequest{Names: names})
			return err
		}})
}

// KeySpaces lists the key spaces, the default one first, with what they
// hold.
func (c *Client) KeySpaces(ctx context.Context) ([]*tidekvpb.KeySpace, error) {
	var resp *tidekvpb.ListKeySpacesResponse
	err := c.invoke(ctx, &rpc{op: "list key spaces", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.ListKeySpaces(ctx, &tidekvpb.ListKeySpacesRequest{})
			return err
		}})
	return resp.GetKeyspaces(), err
}

// KeySpace is the client's view of one key space: the same operations as
// Client's, on that key space's keys. Keys are mapped to the key space's
// part of the cluster's keys here, so requests route as any other; values
// written without a TTL get the key space's default TTL.
type KeySpace struct {
	c     *Client
	name  string
	codec keyspace.Codec
	// defaultTTL is the expiry a value written without one gets.
	defaultTTL time.Duration
}

// KeySpace returns the view of the key space named name ("" or "default":
// the default key space, where keys are as Client's).
func (c *Client) KeySpace(ctx context.Context, name string) (*KeySpace, error) {
	all, err := c.KeySpaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range all {
		if k.GetName() == name || (name == "" && k.GetId() == 0) {
			codec := keyspace.Codec{ID: keyspace.ID(k.GetId()), Mode: keyspace.ModeOf(k.GetMode())}
			return &KeySpace{c: c, name: k.GetName(), codec: codec, defaultTTL: time.Duration(k.GetTtlMs()) * time.Millisecond}, nil
		}
	}
	return nil, fmt.Errorf("%w: no key space %q (tidekv ctl keyspace list shows them)", ErrInvalidArgument, name)
}

// Name is the key space's name.
func (k *KeySpace) Name() string { return k.name }

func (k *KeySpace) enc(key []byte) []byte { return k.codec.Encode(key) }

// in names the key space in the requests made with ctx.
func (k *KeySpace) in(ctx context.Context) context.Context { return keyspace.WithName(ctx, k.name) }

func (k *KeySpace) ttl(e Expiry) Expiry {
	if e == (Expiry{}) {
		e.TTL = k.defaultTTL
	}
	return e
}

// Get reads key (Client.Get).
func (k *KeySpace) Get(ctx context.Context, key []byte, opts ...ReadOption) ([]byte, error) {
	return k.c.Get(k.in(ctx), k.enc(key), opts...)
}

// TTL returns key's remaining time to live (Client.TTL).
func (k *KeySpace) TTL(ctx context.Context, key []byte, opts ...ReadOption) (time.Duration, error) {
	return k.c.TTL(k.in(ctx), k.enc(key), opts...)
}

// Put sets key to value with the key space's default TTL (Client.Put).
func (k *KeySpace) Put(ctx context.Context, key, value []byte) error {
	return k.c.PutTTL(k.in(ctx), k.enc(key), value, k.defaultTTL)
}

// PutTTL is Put with a TTL of its own (0: the key space's default).
func (k *KeySpace) PutTTL(ctx context.Context, key, value []byte, ttl time.Duration) error {
	return k.c.PutTTL(k.in(ctx), k.enc(key), value, k.ttl(Expiry{TTL: ttl}).TTL)
}

// Delete removes key (Client.Delete).
func (k *KeySpace) Delete(ctx context.Context, key []byte) (bool, error) {
	return k.c.Delete(k.in(ctx), k.enc(key))
}

// BatchGet reads keys (Client.BatchGet).
func (k *KeySpace) BatchGet(ctx context.Context, keys [][]byte, opts ...ReadOption) ([]GetResult, error) {
	enc := make([][]byte, len(keys))
	for i, key := range keys {
		enc[i] = k.enc(key)
	}
	return k.c.BatchGet(k.in(ctx), enc, opts...)
}

// Write applies ops atomically (Client.Write); puts without an expiry get
// the key space's default TTL.
func (k *KeySpace) Write(ctx context.Context, ops []Op) error {
	return k.c.Write(k.in(ctx), k.encOps(ops))
}

// WriteEach applies ops per range (Client.WriteEach); puts without an
// expiry get the key space's default TTL.
func (k *KeySpace) WriteEach(ctx context.Context, ops []Op) []OpResult {
	return k.c.WriteEach(k.in(ctx), k.encOps(ops))
}

// encOps maps ops' keys to stored keys and gives puts without an expiry
// the key space's default TTL.
func (k *KeySpace) encOps(ops []Op) []Op {
	enc := make([]Op, len(ops))
	for i, op := range ops {
		enc[i] = op
		enc[i].Key = k.enc(op.Key)
		if !op.Delete && !op.SetTTL {
			enc[i].Expiry = k.ttl(op.Expiry)
		}
	}
	return enc
}

// CompareAndSet is Client.CompareAndSetTTL in the key space; a new value
// without an expiry gets the key space's default TTL.
func (k *KeySpace) CompareAndSet(ctx context.Context, key []byte, expected, newValue *[]byte, e Expiry) (swapped bool, current []byte, currentExists bool, err error) {
	return k.c.CompareAndSetTTL(k.in(ctx), k.enc(key), expected, newValue, k.ttl(e))
}

// hashOrderKey marks a scan of a hashed key space in its stored order.
type hashOrderKey struct{}

// ScanHashOrder returns at most limit pairs (0: no limit) of the key space
// in the order it stores them, from the key after after on (nil: from the
// first). In a hashed key space that order is by a hash of the key, and
// this is the one way to list every key; in an ordered one it is key
// order, as Scan's. opts are Scan's.
func (k *KeySpace) ScanHashOrder(ctx context.Context, after []byte, limit int, opts ...ReadOption) ([]KeyValue, error) {
	c := k.codec
	lo, hi := c.EncodeSpan(nil, nil)
	if k.codec.Mode == keyspace.Hashed {
		lo, hi = keyspace.Span(k.codec.ID)
	}
	if after != nil {
		lo = append(c.Encode(after), 0)
	}
	kvs, err := k.c.Scan(context.WithValue(k.in(ctx), hashOrderKey{}, true), lo, hi, limit, opts...)
	out := kvs[:0]
	for _, kv := range kvs {
		if key, ok := c.Decode(kv.Key); ok {
			out = append(out, KeyValue{Key: key, Value: kv.Value, ExpireAt: kv.ExpireAt})
		}
	}
	return out, err
}

// Scan returns the pairs with keys in [start, end) (Client.Scan). A hashed
// key space keeps no key order to scan in, so Scan is refused there.
func (k *KeySpace) Scan(ctx context.Context, start, end []byte, limit int, opts ...ReadOption) ([]KeyValue, error) {
	if k.codec.Mode == keyspace.Hashed {
		return nil, fmt.Errorf("%w: key space %q is hashed: its keys are placed by hash and have no order to scan", ErrInvalidArgument, k.name)
	}
	c := k.codec
	lo, hi := c.EncodeSpan(start, end)
	kvs, err := k.c.Scan(k.in(ctx), lo, hi, limit, opts...)
	out := kvs[:0]
	for _, kv := range kvs {
		if key, ok := c.Decode(kv.Key); ok {
			out = append(out, KeyValue{Key: key, Value: kv.Value, ExpireAt: kv.ExpireAt})
		}
	}
	return out, err
}
