package keyspaces

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Capacity and eviction (docs/keyspaces.md): every Cache.EvictInterval the
// node looks at each key space with a capacity, measures its share (the
// bytes of the key space's replicas on it), samples keys of the ranges it
// leads, lets cache.Decide pick the least recently used, and proposes their
// deletes through Raft, so every replica applies the same deletes.

// Touch records a use of keys served by leaseholder r, for eviction's
// recency, when they belong to a key space with a capacity. Recency is
// leaseholder memory: a follower read does not count.
func (sp *Spaces) Touch(r *raftstore.Replica, ks ...[]byte) {
	if len(ks) == 0 || keyspace.Of(ks[0]) == keyspace.Default || !r.IsLeader() {
		return // the default key space has no capacity
	}
	k, ok := sp.Catalogue().ByID(keyspace.Of(ks[0]))
	if !ok || k.CapacityPerNode == 0 {
		return
	}
	now := time.Now()
	for _, key := range ks {
		sp.recency.Touch(key, now)
	}
}

// EvictRound runs one round for every key space with a capacity.
func (sp *Spaces) EvictRound(ctx context.Context) {
	sp.learnLocal(ctx)
	for _, ks := range sp.Catalogue() {
		if ks.CapacityPerNode == 0 {
			continue
		}
		if err := sp.evictKeySpace(ctx, ks); err != nil && ctx.Err() == nil {
			log.Printf("node %d: eviction in key space %q: %v", sp.node.NodeID(), ks.Name, err)
		}
	}
}

// learnLocal makes sure the node's copy of the catalogue knows the
// key spaces of its replicas, and forgets the sample cursors of ranges no
// longer here. A node may hold, or be given the lease of, a range of a key
// space it never served a request for, and must know a memory key space to
// keep its data in memory (mem.go). A range past the last key space
// holds no data (no key space owns its keys) and ends nowhere inside one:
// it asks nothing.
func (sp *Spaces) learnLocal(ctx context.Context) {
	cat := sp.Catalogue()
	local := map[uint64]bool{}
	learnt := false
	for _, r := range sp.node.Replicas() {
		d := r.Desc()
		local[r.RangeID()] = true
		if _, ok := cat.ByID(keyspace.Of(d.GetStartKey())); ok || learnt {
			continue
		}
		if !inOneKeySpace(d) {
			if n, err := sp.node.Size(context.Background(), r, sp.node.RecountAfter()); err != nil || n.Stored == 0 {
				continue
			}
		}
		sp.Learn(ctx, d.GetStartKey())
		learnt = true
	}
	sp.evict.KeepOnly(local)
}

func (sp *Spaces) evictKeySpace(ctx context.Context, ks ksconfig.KeySpace) error {
	var rs []*raftstore.Replica
	for _, r := range sp.node.Replicas() {
		if d := r.Desc(); d != nil && keyspace.Of(d.GetStartKey()) == ks.ID {
			rs = append(rs, r)
		}
	}
	cfg := sp.cfg.Cache
	c := cache.Space{Name: ks.Name, Capacity: ks.CapacityPerNode, Evicting: sp.evict.Evicting(ks.ID)}
	c.Held, c.Led = sp.HeldBytes(ctx, rs, false)
	if c.Held > c.Capacity || c.Evicting {
		// The estimate is an upper bound that deletes never lower, so
		// whether to evict is decided on an exact count.
		c.Held, c.Led = sp.HeldBytes(ctx, rs, true)
	}
	if c.Held > c.Capacity || c.Evicting {
		for _, r := range rs {
			if r.IsLeader() {
				s, err := sp.sampleRange(ctx, r, cfg.SampleKeys)
				if err != nil {
					return err
				}
				c.Sample = append(c.Sample, s...)
			}
		}
	}
	plan := cache.Decide(c, cfg, time.Now())
	sp.evict.SetEvicting(ks.ID, plan.Evicting)
	if plan.Started {
		sp.events.Record("evict", fmt.Sprintf("key space %d", ks.ID), "%s", plan.Reason)
	}
	return sp.evictKeys(ctx, ks.ID, plan.Evict)
}

// HeldBytes is the live bytes of rs on this node and of those it leads:
// the size estimates, or exact counts. Live, not stored: the versions a
// delete leaves until GC would keep eviction going after it freed enough.
func (sp *Spaces) HeldBytes(ctx context.Context, rs []*raftstore.Replica, exact bool) (held, led uint64) {
	recount := sp.node.RecountAfter()
	for _, r := range rs {
		var n raftstore.DataSize
		var err error
		if exact {
			n, err = sp.node.ExactSize(ctx, r)
		} else {
			n, err = sp.node.Size(ctx, r, recount)
		}
		if err != nil {
			continue
		}
		held += n.Live
		if r.IsLeader() {
			led += n.Live
		}
	}
	return held, led
}

// sampleRange reads up to n keys of the led range r from where the
// previous round stopped, going round to the range's start.
func (sp *Spaces) sampleRange(ctx context.Context, r *raftstore.Replica, n int) ([]cache.Candidate, error) {
	d := r.Desc()
	from := sp.evict.SampleFrom(r.RangeID(), d.GetStartKey(), d.GetEndKey())
	kvs, err := sp.scanFrom(ctx, r, from, d.GetEndKey(), n)
	if err != nil {
		return nil, err
	}
	full := len(kvs) == n
	var last []byte
	if full {
		last = kvs[n-1].GetKey()
	}
	sp.evict.Sampled(r.RangeID(), last, full)
	if !full && !bytes.Equal(from, d.GetStartKey()) {
		more, err := sp.scanFrom(ctx, r, d.GetStartKey(), from, n-len(kvs))
		if err != nil {
			return nil, err
		}
		kvs = append(kvs, more...)
	}
	out := make([]cache.Candidate, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, cache.Candidate{Key: kv.GetKey(), Range: r.RangeID(), Bytes: uint64(len(kv.GetKey()) + len(kv.GetValue())),
			LastUsed: sp.recency.LastUsed(kv.GetKey())})
	}
	return out, nil
}

func (sp *Spaces) scanFrom(ctx context.Context, r *raftstore.Replica, from, to []byte, n int) ([]*tidekvpb.KeyValue, error) {
	kvs, _, err := r.Scan(ctx, from, to, n, sp.cfg.MaxScanBytes, raftstore.ReadOptions{})
	return kvs, err
}

// evictKeys deletes the keys Decide picked, one Raft write per range,
// except those used since they were sampled.
func (sp *Spaces) evictKeys(ctx context.Context, id keyspace.ID, ev []cache.Candidate) error {
	byRange := map[uint64][]*tidekvpb.WriteOp{}
	for _, c := range ev {
		if sp.recency.LastUsed(c.Key).After(c.LastUsed) {
			continue
		}
		byRange[c.Range] = append(byRange[c.Range], &tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_DELETE, Key: c.Key})
	}
	for rangeID, ops := range byRange {
		r := sp.node.Replica(rangeID)
		if r == nil || !r.IsLeader() {
			continue
		}
		if _, err := r.Write(ctx, ops); err != nil {
			return err
		}
		for _, op := range ops {
			sp.recency.Forget(op.GetKey())
		}
		sp.counters.evicted(id, len(ops))
	}
	return nil
}

// inOneKeySpace reports whether range d lies inside one named key space's
// span, which only the boundary splits of an existing key space make.
func inOneKeySpace(d *tidekvpb.RangeDescriptor) bool {
	id := keyspace.Of(d.GetStartKey())
	_, hi := keyspace.Span(id)
	return id != keyspace.Default && len(d.GetEndKey()) > 0 && hi != nil && bytes.Compare(d.GetEndKey(), hi) <= 0
}
