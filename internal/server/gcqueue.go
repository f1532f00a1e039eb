package server

import (
	"context"
	"log"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/queue"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The MVCC GC queue (internal/queue's GC decides; this file does its
// I/O): counting a range's versions, proposing its GC commands.

// gcPolicyOf is the policy of a range starting at start, by its key space
// as this node's catalogue knows it; a key space the node has not learnt
// yet gets the cluster's gc-ttl, which keeps at least a memory default's
// history.
func (s *Server) gcPolicyOf(start []byte, cfg queue.GCConfig) queue.GCPolicy {
	k, _ := s.ks.Catalogue().ByID(keyspace.Of(start))
	return queue.GCPolicyFor(k, cfg, s.cfg.Txn.MaxDuration)
}

// gcTTL is the cluster's gc-ttl as this node last learnt it.
func (s *Server) gcTTL() time.Duration { return time.Duration(s.gcTTLNanos.Load()) }

// learnGCTTL takes the gc-ttl a heartbeat answer carries (0: the meta
// leaseholder did not say).
func (s *Server) learnGCTTL(ms int64) {
	if ms > 0 {
		s.gcTTLNanos.Store(int64(time.Duration(ms) * time.Millisecond))
	}
}

// collectGarbage is one round of the GC queue. Only its loop runs it, so
// a range's entry changes under no one else.
func (s *Server) collectGarbage(ctx context.Context) {
	if s.store.LogVersion() < raftstore.LogVersionGC {
		return
	}
	cfg := s.cfg.GC
	cfg.TTL = s.gcTTL()
	led, now := map[uint64]bool{}, s.store.Now()
	var prot gcProtections
	for _, r := range s.store.Replicas() {
		if ctx.Err() != nil {
			return
		}
		if !r.IsLeader() || r.RangeID() == keys.MetaRangeID || r.Desc() == nil || !r.VersionedLayout() {
			continue
		}
		led[r.RangeID()] = true
		p := s.gcPolicyOf(r.Desc().GetStartKey(), cfg)
		if s.gcQueue.Due(r.RangeID(), now, p.Every, cfg.Tick()) {
			s.gcRange(ctx, r, cfg, p, now, &prot)
			s.sweepIntents(ctx, r)
		}
	}
	s.gcQueue.KeepOnly(led)
}

// gcRange looks at one range that is due and collects it if worth it.
// Every way out records the look, so the range is next due a policy
// interval from now.
func (s *Server) gcRange(ctx context.Context, r *raftstore.Replica, cfg queue.GCConfig, p queue.GCPolicy, now time.Time, prot *gcProtections) {
	q := &s.gcQueue
	id, written := r.RangeID(), r.WrittenBytes()
	cfg.TTL, cfg.MinGarbageBytes = p.TTL, p.MinGarbage
	if !q.Look(id, now, written, cfg.TTL) {
		return // nothing new since the last look
	}
	st, err := r.MVCCStats()
	if err != nil {
		q.Failed(id, now)
		return
	}
	reason, garbage := q.Counted(id, now, written, st, cfg)
	if reason == "" {
		return
	}
	if err := s.gcProtections(ctx, prot); err != nil {
		log.Printf("range %d: GC: reading the protected timestamps: %v", id, err)
		q.Failed(id, now)
		return
	}
	safePoint, held := gcSafePoint(prot.readAt, cfg.TTL, s.store.HLC().MaxOffset(), prot.all)
	if held != "" {
		reason += "; held at " + held
	}
	res, err := r.GC(ctx, safePoint)
	if err != nil {
		log.Printf("range %d: GC at %s: %v", id, safePoint, err)
		q.Failed(id, now) // tried again at its next look
		return
	}
	q.Passed(id, now, written, garbage, res.Bytes)
	s.events.Record("gc", events.RangeSubject(id), "removed %d versions (%d bytes) below %s (retention %s, %s), GC commands: %d; %s",
		res.Versions, res.Bytes, safePoint, cfg.TTL, p.Why, res.Chunks, reason)
}
