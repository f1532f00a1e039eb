package keyspaces

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/queue"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/storage"
)

// The catalogue lives in the meta range; key spaces are never dropped and
// their mode never changes, and the one rename (a restore's staged key
// space published under its name) only adds a name, so a node's copy is
// only ever missing names, and a miss refreshes it.

// Node is what the key spaces need of the node they run on.
type Node interface {
	// NodeID names the node in log lines.
	NodeID() uint64
	// Replicas are the node's local replicas; Replica is one by range ID
	// (nil: not here).
	Replicas() []*raftstore.Replica
	Replica(rangeID uint64) *raftstore.Replica
	// LookupKey is the local replica whose range holds key (nil: none).
	LookupKey(key []byte) *raftstore.Replica
	// Size bounds what r's range stores, counting it afresh when its span
	// changed or the writes since the last count may have added
	// recountAfter bytes; ExactSize counts it afresh; RecountAfter is the
	// node's recount threshold.
	Size(ctx context.Context, r *raftstore.Replica, recountAfter uint64) (raftstore.DataSize, error)
	ExactSize(ctx context.Context, r *raftstore.Replica) (raftstore.DataSize, error)
	RecountAfter() uint64
	// Refresh reads the catalogue from the meta leaseholder and gives it
	// to Spaces.Set.
	Refresh(ctx context.Context) error
	// Fetch asks a key space's miss handler for the value of key (user
	// key): found false when the origin has none.
	Fetch(ctx context.Context, handler string, key []byte) (val []byte, found bool, err error)
}

// Config is what the key spaces take from the node's configuration.
type Config struct {
	Mem   memengine.Config // each memory key space's engine
	Cache cache.Config
	// MaxScanBytes bounds eviction's sample scans.
	MaxScanBytes int
}

// Spaces is a node's key spaces: its copy of the catalogue and what the
// node keeps by key space.
type Spaces struct {
	cfg    Config
	node   Node
	events *events.Log
	m      *metrics.Set

	cat      atomic.Pointer[ksconfig.Catalogue]
	mem      *memSpaces
	counters counters
	// recency is the last uses of keys in key spaces with a capacity
	// (eviction.go); evict is eviction's memory (internal/queue).
	recency *cache.Recency
	evict   queue.Eviction
	flights *cache.Flights // read-through's fetches in flight
}

// Open wraps base, with the memory key spaces recorded in it routed to
// fresh, empty memory engines (Engine is the result). Node is given later
// (SetNode), once the node that implements it exists.
func Open(base storage.Engine, cfg Config, m *metrics.Set, ev *events.Log) (*Spaces, error) {
	mem, err := openMemSpaces(base, cfg.Mem)
	if err != nil {
		return nil, err
	}
	return &Spaces{cfg: cfg, events: ev, m: m, mem: mem, counters: counters{m: m},
		recency: cache.NewRecency(cfg.Cache.TrackedKeys), flights: cache.NewFlights(cfg.Cache.MaxFetches, cfg.Cache.FetchTimeout)}, nil
}

// SetNode gives the key spaces the node they run on.
func (sp *Spaces) SetNode(n Node) { sp.node = n }

// Engine is the node's engine: the base engine with the memory key spaces'
// user data routed to memory.
func (sp *Spaces) Engine() storage.Engine { return sp.mem.eng }

// Base is the engine beneath the memory key spaces.
func (sp *Spaces) Base() storage.Engine { return sp.mem.base }

// MemoryKeySpaces is the number of key spaces routed to memory.
func (sp *Spaces) MemoryKeySpaces() int { return sp.mem.count() }

// Catalogue is this node's copy of the catalogue, read without a lock.
func (sp *Spaces) Catalogue() ksconfig.Catalogue {
	if p := sp.cat.Load(); p != nil {
		return *p
	}
	return nil
}

// Set replaces the copy unless it knows more key spaces than cat (key
// spaces are never dropped: a shorter catalogue is an older one), and
// routes the memory key spaces it learns.
func (sp *Spaces) Set(cat ksconfig.Catalogue) {
	for {
		old := sp.cat.Load()
		if old != nil && len(*old) > len(cat) {
			return
		}
		if sp.cat.CompareAndSwap(old, &cat) {
			sp.mem.learn(cat)
			return
		}
	}
}

// ByName finds the key space a request names.
func (sp *Spaces) ByName(ctx context.Context, name string) (ksconfig.KeySpace, error) {
	k, ok, err := sp.find(ctx, func(c ksconfig.Catalogue) (ksconfig.KeySpace, bool) { return c.ByName(name) })
	if err == nil && !ok {
		err = kverr.Invalid("no key space %q (tidekv ctl keyspace list shows them)", name)
	}
	return k, err
}

// ByID finds key space number id.
func (sp *Spaces) ByID(ctx context.Context, id keyspace.ID) (ksconfig.KeySpace, error) {
	k, ok, err := sp.find(ctx, func(c ksconfig.Catalogue) (ksconfig.KeySpace, bool) { return c.ByID(id) })
	if err == nil && !ok {
		err = fmt.Errorf("no key space number %d (tidekv ctl keyspace list shows them)", id)
	}
	return k, err
}

// find looks a key space up in this node's copy of the catalogue, and
// once more after refreshing the copy from the meta range if it is not
// there.
func (sp *Spaces) find(ctx context.Context, find func(ksconfig.Catalogue) (ksconfig.KeySpace, bool)) (ksconfig.KeySpace, bool, error) {
	if k, ok := find(sp.Catalogue()); ok {
		return k, true, nil
	}
	if err := sp.node.Refresh(ctx); err != nil {
		return ksconfig.KeySpace{}, false, err
	}
	k, ok := find(sp.Catalogue())
	return k, ok, nil
}

// Check checks that a request's keys belong to the key space it names: a
// named key space's keys as its Codec maps them; the default key space's
// outside the area reserved for the others. Its refusals are kverr's
// INVALID_ARGUMENT.
func (sp *Spaces) Check(ctx context.Context, name string, keys ...[]byte) error {
	if name == "" { // every request of the default key space: no lookup
		for _, k := range keys {
			if keyspace.IsReserved(k) {
				return kverr.Invalid("key %q lies in the area reserved for named key spaces (keys starting 0xFF 0xFF): name the key space (docs/keyspaces.md)", k)
			}
		}
		return nil
	}
	ks, err := sp.ByName(ctx, name)
	if err != nil {
		return err
	}
	c := ks.Codec()
	for _, k := range keys {
		if !c.Owns(k) {
			return kverr.Invalid("key %q is not a key of key space %q as its layout maps keys (docs/keyspaces.md)", k, ks.Name)
		}
	}
	return nil
}

// ScanEnd checks a scan's bounds against the key space it names and
// returns where the scan ends: within an ordered key space's span, and for
// the default key space before the reserved area. A hashed key space has
// no key order to scan in, only the order it stores keys in (hashOrder).
func (sp *Spaces) ScanEnd(ctx context.Context, name string, start, end []byte, hashOrder bool) ([]byte, error) {
	ks, err := sp.ByName(ctx, name)
	if err != nil {
		return nil, err
	}
	if ks.Mode == keyspace.Hashed {
		if !hashOrder {
			return nil, kverr.Invalid("key space %q is hashed: its keys are placed by hash and have no order to scan", ks.Name)
		}
		lo, hi := keyspace.Span(ks.ID)
		if bytes.Compare(start, lo) < 0 || bytes.Compare(start, hi) >= 0 {
			return nil, kverr.Invalid("scan start %q lies outside key space %q", start, ks.Name)
		}
		if len(end) == 0 || bytes.Compare(end, hi) > 0 {
			end = hi
		}
		return end, nil
	}
	if err := sp.Check(ctx, name, start); err != nil {
		return nil, err
	}
	_, hi := ks.Codec().EncodeSpan(nil, nil)
	if len(end) == 0 || bytes.Compare(end, hi) > 0 {
		end = hi
	}
	return end, nil
}

// RF is the replication factor of the key space of the range starting at
// start, as this node's copy of the catalogue knows it (0: the cluster's).
// ChangeReplicas refreshes the copy first (Learn).
func (sp *Spaces) RF(start []byte) int {
	k, _ := sp.Catalogue().ByID(keyspace.Of(start))
	return k.RF
}

// Learn makes sure this node's copy of the catalogue knows the key space
// of the range starting at start, if the meta range does.
func (sp *Spaces) Learn(ctx context.Context, start []byte) {
	_, _ = sp.ByID(ctx, keyspace.Of(start))
}
