package queue

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/mvcc"
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

// Tick is how often the queue's loop runs: each range is looked at on
// the tick nearest its own interval after its last look.
func (c GCConfig) Tick() time.Duration { return min(c.Interval, c.MemoryInterval) }

// GCPolicy is how the queue treats one range.
type GCPolicy struct {
	ksconfig.GCTTL
	Every      time.Duration // how often the range is looked at
	MinGarbage int64         // the least garbage worth a pass, bytes
}

// GCPolicyFor is the policy of a range of key space k (the zero value for
// one not known yet: the cluster's gc-ttl, which keeps at least a memory
// default's history), given the longest a transaction may run.
func GCPolicyFor(k ksconfig.KeySpace, cfg GCConfig, txnMax time.Duration) GCPolicy {
	p := GCPolicy{GCTTL: k.GCTTLFor(cfg.TTL, txnMax), Every: cfg.Interval, MinGarbage: cfg.MinGarbageBytes}
	if k.Engine == ksconfig.Memory {
		p.Every, p.MinGarbage = cfg.MemoryInterval, cfg.MemoryMinGarbageBytes
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

// GC is the GC queue's memory of the ranges this node leads and its
// decisions. A look at a due range goes Look, then (if it asks for a
// count) Counted, then (if that gives a reason) Passed once the pass ran;
// Failed records a look whose count or pass failed. Only the queue's loop
// looks; range reports read Garbage.
type GC struct {
	ranges Ranges[gcRange]
}

// Due says whether range id, looked at every interval, is due on the
// tick at now (a range not looked at yet is). Half a tick of slack keeps
// a tick that comes a little early from putting the look off a whole tick.
func (q *GC) Due(id uint64, now time.Time, every, tick time.Duration) bool {
	r, seen := q.ranges.Get(id)
	return !seen || now.Sub(r.lookedAt) >= every-tick/2
}

// Look starts a look at range id, written its replica's WrittenBytes, and
// says whether its versions must be counted: they need not when nothing
// was written since the last count and what the last pass kept has not
// aged past ttl, and the look is then over.
func (q *GC) Look(id uint64, now time.Time, written uint64, ttl time.Duration) (count bool) {
	last, _ := q.ranges.Get(id)
	aged := last.left > 0 && now.Sub(last.passAt) >= ttl
	if last.counted && written == last.written && !aged {
		last.lookedAt = now
		q.ranges.Set(id, last)
		return false
	}
	return true
}

// Counted takes the count of range id's versions and says why to collect
// it now ("" not: the look is over) and its estimated garbage. cfg's TTL
// and MinGarbageBytes are the range's policy's.
func (q *GC) Counted(id uint64, now time.Time, written uint64, st mvcc.Stats, cfg GCConfig) (reason string, garbage int64) {
	last, _ := q.ranges.Get(id)
	last.lookedAt, last.counted, last.written = now, true, written
	reason, garbage = GCReason(st, last.passAt, last.left, now, cfg)
	if reason != "" {
		return reason, garbage // Passed or Failed records the look
	}
	last.garbage = garbage
	if garbage < cfg.MinGarbageBytes {
		last.left = 0 // too little to look at again before more writes
	}
	q.ranges.Set(id, last)
	return "", garbage
}

// Passed records a pass over range id, counted at written with garbage,
// that removed removed bytes.
func (q *GC) Passed(id uint64, now time.Time, written uint64, garbage, removed int64) {
	last, _ := q.ranges.Get(id)
	last.lookedAt, last.counted, last.written = now, true, written
	last.passAt, last.left = now, max(garbage-removed, 0)
	last.garbage = last.left
	q.ranges.Set(id, last)
}

// Failed records a look at range id whose count or pass failed: it is
// tried again at its next look, nothing else learnt.
func (q *GC) Failed(id uint64, now time.Time) {
	last, _ := q.ranges.Get(id)
	last.lookedAt = now
	q.ranges.Set(id, last)
}

// KeepOnly forgets the ranges not in led.
func (q *GC) KeepOnly(led map[uint64]bool) { q.ranges.KeepOnly(led) }

// Garbage is range id's garbage as last estimated (0: not looked at).
func (q *GC) Garbage(id uint64) uint64 {
	r, _ := q.ranges.Get(id)
	return uint64(r.garbage)
}

// GCReason says why a range whose versions st shows should be collected
// now, or "" if it should not, given its last pass (at passAt, zero for
// none, keeping left bytes younger than gc-ttl). garbage estimates what a
// pass could remove once every version is older than gc-ttl.
func GCReason(st mvcc.Stats, passAt time.Time, left int64, now time.Time, cfg GCConfig) (reason string, garbage int64) {
	if st.Versions > 0 {
		garbage = (st.Versions - st.LiveKeys) * st.TotalBytes / st.Versions
	}
	switch {
	case garbage < cfg.MinGarbageBytes:
		return "", garbage
	case passAt.IsZero():
		return fmt.Sprintf("%d bytes of garbage in %d versions", garbage, st.Versions-st.LiveKeys), garbage
	case garbage >= left+cfg.MinGarbageBytes:
		return fmt.Sprintf("garbage grew to %d bytes since the last pass", garbage), garbage
	case now.Sub(passAt) >= cfg.TTL:
		return fmt.Sprintf("%d bytes of garbage the last pass had to keep are now older than gc-ttl", left), garbage
	}
	return "", garbage
}
