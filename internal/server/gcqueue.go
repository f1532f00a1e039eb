package server

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The MVCC GC queue (docs/transactions.md step 4). A leaseholder looks
// at the user ranges it leads on the versioned layout, each every
// GC.Interval (a memory key space's every GC.MemoryInterval), and collects
// those with enough garbage, proposing GC commands at the safe point
// now − the range's GC TTL (its key space's, ksconfig.Settings.GCTTLFor;
// Replica.GC, one chunk per Raft entry). A range is looked at
// (mvcc.ComputeStats, one read of its data) only when it has been written
// since the last look, or when the garbage its last pass had to keep
// (newer than the safe point then) has since aged past its GC TTL.

// GCConfig configures the GC queue. The gc-ttl cluster setting overrides
// TTL for the whole cluster; nodes learn it from their heartbeats.
type GCConfig struct {
	// TTL is how long an overwritten or deleted version stays readable
	// (by reads at a timestamp: backups, and step 3's snapshot reads)
	// in a key space that sets no GC TTL of its own.
	// 10 minutes, like a short CockroachDB gc.ttl: long enough for a
	// backup or a long scan of a range, short enough that an overwrite
	// workload keeps at most 10 minutes of its writes.
	TTL time.Duration
	// Interval is how often a leaseholder looks at a range.
	Interval time.Duration
	// MemoryInterval is how often it looks at a memory key space's range:
	// 10 s, so a cache under constant overwrite keeps about its GC TTL
	// plus 10 s of overwrites in RAM rather than plus a minute. A look
	// at a memory range reads RAM only.
	MemoryInterval time.Duration
	// MinGarbageBytes is the least garbage worth a pass: the range's
	// versions that are not live times their mean size.
	MinGarbageBytes int64
	// MemoryMinGarbageBytes is MinGarbageBytes for a memory key space's
	// range: 64 KiB. A pass there reads RAM only, and a cache's ranges
	// are small (its capacity per node is spread over hash slices): with
	// 1 MiB a range could keep up to 1 MiB of dead versions for good.
	MemoryMinGarbageBytes int64
}

// DefaultGCConfig returns the documented defaults.
func DefaultGCConfig() GCConfig {
	return GCConfig{TTL: 10 * time.Minute, Interval: time.Minute, MemoryInterval: 10 * time.Second,
		MinGarbageBytes: 1 << 20, MemoryMinGarbageBytes: 64 << 10}
}

// Validate checks the bounds (ksconfig.MinGCTTL and MaxGCTTL: above the
// clock offsets the HLC tolerates, at most a month).
func (c GCConfig) Validate() error {
	switch {
	case c.TTL < ksconfig.MinGCTTL || c.TTL > ksconfig.MaxGCTTL:
		return fmt.Errorf("gc-ttl must be between %v and %v, not %v", ksconfig.MinGCTTL, ksconfig.MaxGCTTL, c.TTL)
	case c.Interval <= 0 || c.MemoryInterval <= 0:
		return errors.New("the GC intervals must be positive")
	case c.MinGarbageBytes < 0 || c.MemoryMinGarbageBytes < 0:
		return errors.New("the GC minimum garbage must not be negative")
	}
	return nil
}

// tick is how often the queue's loop runs: each range is looked at on
// the tick nearest its own interval after its last look.
func (c GCConfig) tick() time.Duration { return min(c.Interval, c.MemoryInterval) }

// gcPolicy is how the queue treats one range.
type gcPolicy struct {
	ksconfig.GCTTL
	every      time.Duration // how often the range is looked at
	minGarbage int64         // the least garbage worth a pass, bytes
}

// gcPolicyOf is the policy of a range starting at start, by its key space
// as this node's catalogue knows it; a key space the node has not learnt
// yet gets the cluster's gc-ttl, which keeps at least a memory default's
// history.
func (s *Server) gcPolicyOf(start []byte, cfg GCConfig) gcPolicy {
	k, _ := s.keyspaces.get().ByID(keyspace.Of(start))
	return gcPolicyFor(k, cfg, s.cfg.Txn.MaxDuration)
}

// gcPolicyFor is the policy of a range of key space k (the zero value
// for one not known), given the longest a transaction may run.
func gcPolicyFor(k ksconfig.KeySpace, cfg GCConfig, txnMax time.Duration) gcPolicy {
	p := gcPolicy{GCTTL: k.GCTTLFor(cfg.TTL, txnMax), every: cfg.Interval, minGarbage: cfg.MinGarbageBytes}
	if k.Engine == ksconfig.Memory {
		p.every, p.minGarbage = cfg.MemoryInterval, cfg.MemoryMinGarbageBytes
	}
	return p
}

// gcRange is what the queue remembers of a range it leads.
type gcRange struct {
	lookedAt time.Time // when the queue last looked (zero: never)
	counted  bool      // a look has counted its versions (MVCCStats)
	written  uint64    // the replica's WrittenBytes at the last look
	passAt   time.Time // when its last pass ran (zero: none yet)
	left     int64     // garbage that pass had to keep, younger than gc-ttl
	garbage  int64     // estimated at the last look, less what a pass removed
}

// gcRanges is the queue's memory of the ranges this node leads: the
// queue's loop writes it, range reports read each range's garbage.
type gcRanges struct {
	mu sync.Mutex
	m  map[uint64]gcRange
}

func (g *gcRanges) get(id uint64) (gcRange, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.m[id]
	return r, ok
}

func (g *gcRanges) set(id uint64, r gcRange) {
	g.mu.Lock()
	g.m[id] = r
	g.mu.Unlock()
}

// due says whether range id, looked at every interval, is due on the
// tick at now (a range not looked at yet is). Half a tick of slack keeps
// a tick that comes a little early from putting the look off a whole tick.
func (g *gcRanges) due(id uint64, now time.Time, every, tick time.Duration) bool {
	r, seen := g.get(id)
	return !seen || now.Sub(r.lookedAt) >= every-tick/2
}

// keepOnly forgets the ranges not in led.
func (g *gcRanges) keepOnly(led map[uint64]bool) {
	g.mu.Lock()
	maps.DeleteFunc(g.m, func(id uint64, _ gcRange) bool { return !led[id] })
	g.mu.Unlock()
}

// garbage is the range's garbage as last estimated (0: not looked at).
func (g *gcRanges) garbage(id uint64) uint64 {
	r, _ := g.get(id)
	return uint64(r.garbage)
}

// gcReason says why a range whose versions st shows should be collected
// now, or "" if it should not. garbage estimates what a pass could remove
// once every version is older than gc-ttl.
func gcReason(st mvcc.Stats, last gcRange, now time.Time, cfg GCConfig) (reason string, garbage int64) {
	if st.Versions > 0 {
		garbage = (st.Versions - st.LiveKeys) * st.TotalBytes / st.Versions
	}
	switch {
	case garbage < cfg.MinGarbageBytes:
		return "", garbage
	case last.passAt.IsZero():
		return fmt.Sprintf("%d bytes of garbage in %d versions", garbage, st.Versions-st.LiveKeys), garbage
	case garbage >= last.left+cfg.MinGarbageBytes:
		return fmt.Sprintf("garbage grew to %d bytes since the last pass", garbage), garbage
	case now.Sub(last.passAt) >= cfg.TTL:
		return fmt.Sprintf("%d bytes of garbage the last pass had to keep are now older than gc-ttl", last.left), garbage
	}
	return "", garbage
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
	for _, r := range s.store.Replicas() {
		if ctx.Err() != nil {
			return
		}
		if !r.IsLeader() || r.RangeID() == keys.MetaRangeID || r.Desc() == nil || !r.VersionedLayout() {
			continue
		}
		led[r.RangeID()] = true
		p := s.gcPolicyOf(r.Desc().GetStartKey(), cfg)
		if s.gcRanges.due(r.RangeID(), now, p.every, cfg.tick()) {
			s.gcRange(ctx, r, cfg, p, now)
			s.sweepIntents(ctx, r)
		}
	}
	s.gcRanges.keepOnly(led)
}

// gcRange looks at one range that is due and collects it if worth it.
// Every way out records the look, so the range is next due a policy
// interval from now.
func (s *Server) gcRange(ctx context.Context, r *raftstore.Replica, cfg GCConfig, p gcPolicy, now time.Time) {
	id, written := r.RangeID(), r.WrittenBytes()
	last, _ := s.gcRanges.get(id)
	prev := last
	last.lookedAt, prev.lookedAt = now, now
	cfg.TTL, cfg.MinGarbageBytes = p.TTL, p.minGarbage
	aged := last.left > 0 && now.Sub(last.passAt) >= cfg.TTL
	if last.counted && written == last.written && !aged {
		s.gcRanges.set(id, last)
		return // nothing new since the last look
	}
	st, err := r.MVCCStats()
	if err != nil {
		s.gcRanges.set(id, prev)
		return
	}
	last.counted, last.written = true, written
	reason, garbage := gcReason(st, last, now, cfg)
	last.garbage = garbage
	if reason == "" {
		if garbage < cfg.MinGarbageBytes {
			last.left = 0 // too little to look at again before more writes
		}
		s.gcRanges.set(id, last)
		return
	}
	safePoint := hlc.Timestamp{WallTime: s.store.HLC().Now().WallTime - cfg.TTL.Nanoseconds()}
	res, err := r.GC(ctx, safePoint)
	if err != nil {
		log.Printf("range %d: GC at %s: %v", id, safePoint, err)
		s.gcRanges.set(id, prev) // tried again at its next look
		return
	}
	last.passAt, last.left = now, max(garbage-res.Bytes, 0)
	last.garbage = last.left
	s.gcRanges.set(id, last)
	s.events.Record("gc", rangeSubject(id), "removed %d versions (%d bytes) below %s (retention %s, %s), GC commands: %d; %s",
		res.Versions, res.Bytes, safePoint, cfg.TTL, p.Why, res.Chunks, reason)
}
