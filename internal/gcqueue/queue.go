package gcqueue

import (
	"context"
	"log"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/queue"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Node is the node as its GC queue and protected timestamps see it.
type Node interface {
	// LogVersion is the Raft log version every node runs.
	LogVersion() uint32
	// Replicas are the node's local replicas.
	Replicas() []*raftstore.Replica
	// Now is the store's time; Clock its HLC; CommitWait waits until a
	// read at ts is not in the future here.
	Now() time.Time
	Clock() *hlc.Clock
	CommitWait(ctx context.Context, ts hlc.Timestamp)
	// Policy is the GC policy of a range starting at start, by its key
	// space as the node knows it.
	Policy(start []byte, cfg queue.GCConfig) queue.GCPolicy
	// SweepIntents resolves r's intents that no request runs into.
	SweepIntents(ctx context.Context, r *raftstore.Replica)
	// Protected is the protected timestamp records on the node's engine
	// (the meta range's, read on its leaseholder).
	Protected() ([]*tidekvpb.ProtectedTimestamp, error)
	// Record adds an event to the node's log.
	Record(kind, subject, reasonFormat string, args ...any)
}

// Queue is a node's GC queue.
type Queue struct {
	node  Node
	route *adminroute.Router
	cfg   queue.GCConfig
	// ttlNanos is the cluster's gc-ttl as last learnt.
	ttlNanos atomic.Int64
	// mem is the queue's memory; only Round changes a range's entry.
	mem queue.GC
}

// New is the GC queue of node with cfg, cfg.TTL until the node learns the
// cluster's gc-ttl; it reaches the meta range through route.
func New(node Node, route *adminroute.Router, cfg queue.GCConfig) *Queue {
	q := &Queue{node: node, route: route, cfg: cfg}
	q.ttlNanos.Store(int64(cfg.TTL))
	return q
}

// TTL is the cluster's gc-ttl as this node last learnt it.
func (q *Queue) TTL() time.Duration { return time.Duration(q.ttlNanos.Load()) }

// LearnTTL takes the gc-ttl a heartbeat answer carries (0: the meta
// leaseholder did not say).
func (q *Queue) LearnTTL(ms int64) {
	if ms > 0 {
		q.ttlNanos.Store(int64(time.Duration(ms) * time.Millisecond))
	}
}

// Garbage is the garbage the queue last counted in range id.
func (q *Queue) Garbage(id uint64) uint64 { return q.mem.Garbage(id) }

// Forget drops the queue's memory, so that the next round looks at every
// range it leads.
func (q *Queue) Forget() { q.mem.KeepOnly(nil) }

// Round is one round of the GC queue. Only its loop runs it, so a range's
// entry changes under no one else.
func (q *Queue) Round(ctx context.Context) {
	if q.node.LogVersion() < raftstore.LogVersionGC {
		return
	}
	cfg := q.cfg
	cfg.TTL = q.TTL()
	led, now := map[uint64]bool{}, q.node.Now()
	var prot protections
	for _, r := range q.node.Replicas() {
		if ctx.Err() != nil {
			return
		}
		if !r.IsLeader() || r.RangeID() == keys.MetaRangeID || r.Desc() == nil || !r.VersionedLayout() {
			continue
		}
		led[r.RangeID()] = true
		p := q.node.Policy(r.Desc().GetStartKey(), cfg)
		if q.mem.Due(r.RangeID(), now, p.Every, cfg.Tick()) {
			q.gcRange(ctx, r, cfg, p, now, &prot)
			q.node.SweepIntents(ctx, r)
		}
	}
	q.mem.KeepOnly(led)
}

// gcRange looks at one range that is due and collects it if worth it.
// Every way out records the look, so the range is next due a policy
// interval from now.
func (q *Queue) gcRange(ctx context.Context, r *raftstore.Replica, cfg queue.GCConfig, p queue.GCPolicy, now time.Time, prot *protections) {
	m := &q.mem
	id, written := r.RangeID(), r.WrittenBytes()
	cfg.TTL, cfg.MinGarbageBytes = p.TTL, p.MinGarbage
	if !m.Look(id, now, written, cfg.TTL) {
		return // nothing new since the last look
	}
	st, err := r.MVCCStats()
	if err != nil {
		m.Failed(id, now)
		return
	}
	reason, garbage := m.Counted(id, now, written, st, cfg)
	if reason == "" {
		return
	}
	if err := q.protections(ctx, prot); err != nil {
		log.Printf("range %d: GC: reading the protected timestamps: %v", id, err)
		m.Failed(id, now)
		return
	}
	safePoint, held := gcSafePoint(prot.readAt, cfg.TTL, q.node.Clock().MaxOffset(), prot.all)
	if held != "" {
		reason += "; held at " + held
	}
	res, err := r.GC(ctx, safePoint)
	if err != nil {
		log.Printf("range %d: GC at %s: %v", id, safePoint, err)
		m.Failed(id, now) // tried again at its next look
		return
	}
	m.Passed(id, now, written, garbage, res.Bytes)
	q.node.Record("gc", events.RangeSubject(id), "removed %d versions (%d bytes) below %s (retention %s, %s), GC commands: %d; %s",
		res.Versions, res.Bytes, safePoint, cfg.TTL, p.Why, res.Chunks, reason)
}
