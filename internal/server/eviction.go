package server

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

// touch records a use of keys served by leaseholder r, for eviction's
// recency, when they belong to a key space with a capacity. Recency is
// leaseholder memory: a follower read does not count.
func (s *Server) touch(r *raftstore.Replica, ks ...[]byte) {
	if len(ks) == 0 || keyspace.Of(ks[0]) == keyspace.Default || !r.IsLeader() {
		return // the default key space has no capacity
	}
	k, ok := s.keyspaces.get().ByID(keyspace.Of(ks[0]))
	if !ok || k.CapacityPerNode == 0 {
		return
	}
	now := time.Now()
	for _, key := range ks {
		s.recency.Touch(key, now)
	}
}

// evictRound runs one round for every key space with a capacity.
func (s *Server) evictRound(ctx context.Context) {
	s.learnLocalKeySpaces(ctx)
	for _, ks := range s.keyspaces.get() {
		if ks.CapacityPerNode == 0 {
			continue
		}
		if err := s.evictKeySpace(ctx, ks); err != nil && ctx.Err() == nil {
			log.Printf("node %d: eviction in key space %q: %v", s.nodeID, ks.Name, err)
		}
	}
}

// learnLocalKeySpaces makes sure the node's copy of the catalogue knows the
// key spaces of its replicas, and forgets the sample cursors of ranges no
// longer here. A node may hold, or be given the lease of, a range of a key
// space it never served a request for, and must know a memory key space to
// keep its data in memory (memspaces.go). A range past the last key space
// holds no data (no key space owns its keys) and ends nowhere inside one:
// it asks nothing.
func (s *Server) learnLocalKeySpaces(ctx context.Context) {
	cat := s.keyspaces.get()
	local := map[uint64]bool{}
	learnt := false
	for _, r := range s.store.Replicas() {
		d := r.Desc()
		local[r.RangeID()] = true
		if _, ok := cat.ByID(keyspace.Of(d.GetStartKey())); ok || learnt {
			continue
		}
		if !inOneKeySpace(d) {
			if n, err := s.rangeSize(r, d.GetGeneration(), s.recountAfter()); err != nil || n == 0 {
				continue
			}
		}
		s.learnKeySpace(ctx, d.GetStartKey())
		learnt = true
	}
	s.queues.evict.KeepOnly(local)
}

func (s *Server) evictKeySpace(ctx context.Context, ks ksconfig.KeySpace) error {
	var rs []*raftstore.Replica
	for _, r := range s.store.Replicas() {
		if d := r.Desc(); d != nil && keyspace.Of(d.GetStartKey()) == ks.ID {
			rs = append(rs, r)
		}
	}
	cfg := s.cfg.Cache
	sp := cache.Space{Name: ks.Name, Capacity: ks.CapacityPerNode, Evicting: s.queues.evict.Evicting(ks.ID)}
	sp.Held, sp.Led = s.heldBytes(ctx, rs, false)
	if sp.Held > sp.Capacity || sp.Evicting {
		// The estimate is an upper bound that deletes never lower, so
		// whether to evict is decided on an exact count.
		sp.Held, sp.Led = s.heldBytes(ctx, rs, true)
	}
	if sp.Held > sp.Capacity || sp.Evicting {
		for _, r := range rs {
			if r.IsLeader() {
				c, err := s.sampleRange(ctx, r, cfg.SampleKeys)
				if err != nil {
					return err
				}
				sp.Sample = append(sp.Sample, c...)
			}
		}
	}
	plan := cache.Decide(sp, cfg, time.Now())
	s.queues.evict.SetEvicting(ks.ID, plan.Evicting)
	if plan.Started {
		s.events.Record("evict", fmt.Sprintf("key space %d", ks.ID), "%s", plan.Reason)
	}
	return s.evictKeys(ctx, ks.ID, plan.Evict)
}

// heldBytes is the live bytes of rs on this node and of those it leads:
// the size estimates, or exact counts. Live, not stored: the versions a
// delete leaves until GC would keep eviction going after it freed enough.
func (s *Server) heldBytes(ctx context.Context, rs []*raftstore.Replica, exact bool) (held, led uint64) {
	recount := s.recountAfter()
	for _, r := range rs {
		gen := r.Desc().GetGeneration()
		var n raftstore.DataSize
		var err error
		if exact {
			n, err = s.sizes.exact(ctx, r, gen)
		} else {
			n, err = s.sizes.size(ctx, r, gen, recount)
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
func (s *Server) sampleRange(ctx context.Context, r *raftstore.Replica, n int) ([]cache.Candidate, error) {
	d := r.Desc()
	from := s.queues.evict.SampleFrom(r.RangeID(), d.GetStartKey(), d.GetEndKey())
	kvs, err := s.scanFrom(ctx, r, from, d.GetEndKey(), n)
	if err != nil {
		return nil, err
	}
	full := len(kvs) == n
	var last []byte
	if full {
		last = kvs[n-1].GetKey()
	}
	s.queues.evict.Sampled(r.RangeID(), last, full)
	if !full && !bytes.Equal(from, d.GetStartKey()) {
		more, err := s.scanFrom(ctx, r, d.GetStartKey(), from, n-len(kvs))
		if err != nil {
			return nil, err
		}
		kvs = append(kvs, more...)
	}
	out := make([]cache.Candidate, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, cache.Candidate{Key: kv.GetKey(), Range: r.RangeID(), Bytes: uint64(len(kv.GetKey()) + len(kv.GetValue())),
			LastUsed: s.recency.LastUsed(kv.GetKey())})
	}
	return out, nil
}

func (s *Server) scanFrom(ctx context.Context, r *raftstore.Replica, from, to []byte, n int) ([]*tidekvpb.KeyValue, error) {
	kvs, _, err := r.Scan(ctx, from, to, n, s.cfg.Limits.MaxScanBytes, raftstore.ReadOptions{})
	return kvs, err
}

// evictKeys deletes the keys Decide picked, one Raft write per range,
// except those used since they were sampled.
func (s *Server) evictKeys(ctx context.Context, id keyspace.ID, ev []cache.Candidate) error {
	byRange := map[uint64][]*tidekvpb.WriteOp{}
	for _, c := range ev {
		if s.recency.LastUsed(c.Key).After(c.LastUsed) {
			continue
		}
		byRange[c.Range] = append(byRange[c.Range], &tidekvpb.WriteOp{Kind: tidekvpb.WriteOp_DELETE, Key: c.Key})
	}
	for rangeID, ops := range byRange {
		r := s.store.GetReplica(rangeID)
		if r == nil || !r.IsLeader() {
			continue
		}
		if _, err := r.Write(ctx, ops); err != nil {
			return err
		}
		for _, op := range ops {
			s.recency.Forget(op.GetKey())
		}
		s.counters.evicted(id, len(ops))
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
