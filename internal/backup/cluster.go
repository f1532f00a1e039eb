package backup

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/ksconfig"
)

// ClientSource is a Source over a cluster's client.
type ClientSource struct {
	views
	// Lease is how long its protected timestamp outlives the last renewal
	// (default DefaultProtectLease): how long an abandoned backup pins GC.
	Lease time.Duration
	// Owner names the backup in its protected timestamp.
	Owner string
}

// DefaultProtectLease is ClientSource.Lease's default. A backup renews its
// protection every quarter of it.
const DefaultProtectLease = 2 * time.Minute

// ClientSink is a Sink over a cluster's client.
type ClientSink struct{ views }

// NewClientSource reads the cluster c reaches.
func NewClientSource(c *client.Client) *ClientSource { return &ClientSource{views: views{C: c}} }

// NewClientSink writes to the cluster c reaches.
func NewClientSink(c *client.Client) *ClientSink { return &ClientSink{views{C: c}} }

// views caches the client's key space views: looking one up lists the key
// spaces, which would double the requests of every page and batch.
type views struct {
	C  *client.Client
	mu sync.Mutex
	m  map[string]*client.KeySpace
}

func (v *views) view(ctx context.Context, ks string) (*client.KeySpace, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.m[ks]; ok {
		return k, nil
	}
	k, err := v.C.KeySpace(ctx, ks)
	if err != nil {
		return nil, err
	}
	if v.m == nil {
		v.m = map[string]*client.KeySpace{}
	}
	v.m[ks] = k
	return k, nil
}

// Hold creates a protected timestamp (Client.ProtectTimestamp): its
// timestamp comes from the cluster's clock, not the client's, so every
// write acknowledged before it was asked for is at or below it. It renews
// the protection every quarter of the lease; if no renewal succeeds for a
// whole lease (GC may then have passed it), held is cancelled. release
// stops the renewals and removes the protection.
func (s *ClientSource) Hold(ctx context.Context) (hlc.Timestamp, context.Context, func(), error) {
	lease := cmp.Or(s.Lease, DefaultProtectLease)
	if lease < time.Second {
		return hlc.Timestamp{}, nil, nil, fmt.Errorf("backup refused: a protect lease of %s is shorter than a second", lease)
	}
	p, err := s.C.ProtectTimestamp(ctx, lease, cmp.Or(s.Owner, "backup"))
	if err != nil {
		return hlc.Timestamp{}, nil, nil, fmt.Errorf("backup: protecting its timestamp from GC: %w", err)
	}
	held, lose := context.WithCancelCause(ctx)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(lease / 4)
		defer t.Stop()
		renewed := time.Now()
		for {
			select {
			case <-done:
				return
			case <-held.Done():
				return
			case <-t.C:
			}
			err := s.C.RenewProtection(held, p.GetId(), lease)
			if err == nil {
				renewed = time.Now()
			} else if time.Since(renewed) >= lease {
				lose(fmt.Errorf("backup failed: its protected timestamp %d (at %s) was not renewed for %s, so GC may pass it: %w", p.GetId(), p.GetTimestamp().HLC(), lease, err))
				return
			}
		}
	}()
	release := func() {
		close(done)
		<-stopped
		lose(nil)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = s.C.ReleaseProtection(rctx, p.GetId()) // else it expires with its lease
	}
	return p.GetTimestamp().HLC(), held, release, nil
}

// ClusterID asks a node for the cluster's ID.
func (s *ClientSource) ClusterID(ctx context.Context) (uint64, error) {
	st, err := s.C.Status(ctx)
	return st.GetClusterId(), err
}

// KeySpaces lists the named key spaces.
func (s *ClientSource) KeySpaces(ctx context.Context) ([]ksconfig.Settings, error) {
	return namedKeySpaces(ctx, s.C)
}

// KeySpaces lists the named key spaces.
func (s *ClientSink) KeySpaces(ctx context.Context) ([]ksconfig.Settings, error) {
	return namedKeySpaces(ctx, s.C)
}

func namedKeySpaces(ctx context.Context, c *client.Client) ([]ksconfig.Settings, error) {
	all, err := c.KeySpaces(ctx)
	if err != nil {
		return nil, err
	}
	var out []ksconfig.Settings
	for _, k := range all {
		if k.GetId() != uint32(keyspace.Default) {
			out = append(out, ksconfig.FromAPI(k).Settings)
		}
	}
	return out, nil
}

// Scan reads one page of key space ks at ts, every range at ts.
func (s *ClientSource) Scan(ctx context.Context, ks string, after []byte, limit int, ts hlc.Timestamp) ([]Pair, error) {
	view, err := s.view(ctx, ks)
	if err != nil {
		return nil, err
	}
	kvs, err := view.ScanHashOrder(ctx, after, limit, client.ReadAt(ts))
	if err != nil {
		// The node's refusal names the threshold but not what it means
		// for a backup; the wire carries no distinct code for it.
		if strings.Contains(err.Error(), "below the GC threshold") {
			return nil, fmt.Errorf("backup failed: it outlasted the gc-ttl of key space %q (its own, else the cluster's), so its timestamp %s is below the GC threshold and can no longer be read (run it faster or raise gc-ttl; docs/backup.md): %w", cmp.Or(ks, keyspace.DefaultName), ts, err)
		}
		return nil, err
	}
	out := make([]Pair, len(kvs))
	for i, kv := range kvs {
		out[i] = Pair{Key: kv.Key, Value: kv.Value}
		if !kv.ExpireAt.IsZero() {
			out[i].ExpireAtMs = kv.ExpireAt.UnixMilli()
		}
	}
	return out, nil
}

// StageKeySpace creates a named key space under its staging name.
func (s *ClientSink) StageKeySpace(ctx context.Context, set ksconfig.Settings) error {
	_, err := s.C.StageKeySpace(ctx, ksconfig.ToAPI(ksconfig.KeySpace{Settings: set}))
	return err
}

// Publish gives the staged key spaces their names in one meta range
// change.
func (s *ClientSink) Publish(ctx context.Context, names []string) error {
	return s.C.PublishKeySpaces(ctx, names)
}

// Empty scans one key of each key space.
func (s *ClientSink) Empty(ctx context.Context) (bool, error) {
	all, err := s.C.KeySpaces(ctx)
	if err != nil {
		return false, err
	}
	for _, k := range all {
		view, err := s.C.KeySpace(ctx, k.GetName())
		if err != nil {
			return false, err
		}
		kvs, err := view.ScanHashOrder(ctx, nil, 1)
		if err != nil || len(kvs) > 0 {
			return false, err
		}
	}
	return true, nil
}

// Write puts pairs, each range's share as one Write, with their expiry (a
// time already past leaves the key absent). Pairs without one (in a key
// space with a default TTL: backups of format version 1) get the key
// space's TTL afresh.
func (s *ClientSink) Write(ctx context.Context, ks string, pairs []Pair) error {
	view, err := s.view(ctx, ks)
	if err != nil {
		return err
	}
	ops := make([]client.Op, len(pairs))
	for i, p := range pairs {
		ops[i] = client.Op{Key: p.Key, Value: p.Value}
		if p.ExpireAtMs > 0 {
			ops[i].Expiry.At = time.UnixMilli(p.ExpireAtMs)
		}
	}
	for i, r := range view.WriteEach(ctx, ops) {
		if r.Err != nil {
			return fmt.Errorf("restore: writing key %q: %w", pairs[i].Key, r.Err)
		}
	}
	return nil
}
