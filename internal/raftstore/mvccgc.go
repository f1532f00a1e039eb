package raftstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
)

// MVCC garbage collection (docs/transactions.md "GC"; replica GC, which
// removes whole stale replicas, is gc.go). Each range keeps a replicated
// GC threshold (ReplicaState.gc_threshold). The leaseholder's GC queue
// (server) calls Replica.GC, which proposes GCCommand entries one chunk at
// a time: each raises the threshold to its safe point and, at apply,
// removes what mvcc.GC removes within the budget the command carries, so
// every replica removes exactly the same versions. Reads below the
// threshold are refused; writes at or below it land just above it
// (dataLocked), since they could otherwise slip under a removed tombstone.

// GCThresholdError refuses a read at a timestamp whose versions GC may
// have removed.
type GCThresholdError struct {
	RangeID         uint64
	Read, Threshold hlc.Timestamp
}

func (e *GCThresholdError) Error() string {
	return fmt.Sprintf("read at %s is below the GC threshold %s of range %d; retention is gc-ttl (its key space's, else the cluster's)", e.Read, e.Threshold, e.RangeID)
}

// Kind is INVALID_ARGUMENT: the versions such a read needs may be gone
// for good, so retrying cannot help. Without a kind it was UNAVAILABLE,
// which the client retried until it gave up.
func (e *GCThresholdError) Kind() kverr.Kind { return kverr.InvalidArgument }

// Is makes errors.Is(err, kverr.ErrInvalidArgument) hold, as for any
// error of its kind.
func (e *GCThresholdError) Is(target error) bool {
	t, ok := target.(*kverr.Error)
	return ok && t.Kind() == kverr.InvalidArgument
}

// GCResult says what one pass of Replica.GC did.
type GCResult struct {
	Chunks int // GC commands applied
	mvcc.GCStats
}

// gcApplied is what one GC command's apply answers.
type gcApplied struct {
	resume []byte // user key the next chunk starts at; nil when done
	stats  mvcc.GCStats
}

// GCThreshold is the range's GC threshold as of its last apply (zero:
// nothing collected yet).
func (r *Replica) GCThreshold() hlc.Timestamp { return *r.gcThreshold.Load() }

func gcThresholdOf(st *tidekvpb.ReplicaState) hlc.Timestamp {
	return commandTimestamp(st.GetGcThreshold())
}

func (r *Replica) publishGCThresholdLocked() {
	t := gcThresholdOf(r.mu.state)
	r.gcThreshold.Store(&t)
}

// raiseGCThresholdLocked moves the threshold up to t (never down).
func (r *Replica) raiseGCThresholdLocked(t hlc.Timestamp) {
	if gcThresholdOf(r.mu.state).Less(t) {
		r.mu.state.GcThreshold = logTimestamp(t)
		r.publishGCThresholdLocked()
	}
}

// checkGCThreshold refuses a read at ts (zero: the newest data, always
// allowed) below the threshold. Reads check before and after they read,
// since a GC applied in between may have removed what they saw.
func (r *Replica) checkGCThreshold(ts hlc.Timestamp) error {
	if thr := r.GCThreshold(); !ts.IsZero() && ts.Less(thr) {
		return &GCThresholdError{RangeID: r.rangeID, Read: ts, Threshold: thr}
	}
	return nil
}

// GC removes the range's versions no read at or above safePoint can see,
// one chunk (one Raft entry) at a time until the range is done. Only the
// leaseholder proposes it, once every node applies log version 5.
func (r *Replica) GC(ctx context.Context, safePoint hlc.Timestamp) (GCResult, error) {
	var out GCResult
	if err := r.store.needVersion(LogVersionGC, "MVCC garbage collection"); err != nil {
		return out, err
	}
	if !r.VersionedLayout() {
		return out, fmt.Errorf("%w: range %d is not on the versioned layout: nothing to collect", ErrInvalidRequest, r.rangeID)
	}
	var resume []byte
	for {
		cmd := &tidekvpb.GCCommand{SafePoint: logTimestamp(safePoint), ResumeKey: resume, Budget: r.store.cfg.GCChunkVersions}
		res, err := r.propose(ctx, &tidekvpb.RaftCommand{Gc: cmd}, nil)
		if err != nil {
			return out, err
		}
		out.Chunks++
		st := res.gc.stats
		out.Keys, out.Versions, out.Bytes = out.Keys+st.Keys, out.Versions+st.Versions, out.Bytes+st.Bytes
		if resume = res.gc.resume; resume == nil {
			r.store.stats.GCPasses.Add(1)
			return out, nil
		}
	}
}

// MVCCStats sizes the range's versioned data (mvcc.ComputeStatsAt: one
// read of all its versions), values expired by the node's clock counted
// as garbage, which GC removes once they are older than its safe point.
func (r *Replica) MVCCStats() (mvcc.Stats, error) {
	if !r.VersionedLayout() {
		return mvcc.Stats{}, fmt.Errorf("%w: range %d is not on the versioned layout", ErrInvalidRequest, r.rangeID)
	}
	d := r.desc.Load()
	lo, hi := keys.VersionedSpan(d.GetStartKey(), d.GetEndKey())
	return mvcc.ComputeStatsAt(r.store.eng, lo, hi, r.readNow())
}

// applyGCLocked raises the threshold and collects one chunk. What it
// removes depends on the command and the replicated data only.
func (r *Replica) applyGCLocked(ab *applyBatch, c *tidekvpb.GCCommand) applyResult {
	sp := hlc.Timestamp{WallTime: c.GetSafePoint().GetWallNanos(), Logical: c.GetSafePoint().GetLogical()}
	if !isMVCC(r.mu.state) || sp.IsZero() || c.GetBudget() == 0 {
		return applyResult{err: fmt.Errorf("%w: range %d: GC needs the versioned layout, a safe point and a budget", ErrInvalidRequest, r.rangeID)}
	}
	// mvcc.GC reads the engine, which must hold what earlier entries of
	// this round wrote.
	r.mustWrite(r.flushAppliedLocked(ab))
	r.raiseGCThresholdLocked(sp)
	d := r.mu.state.GetDesc()
	start := d.GetStartKey()
	if bytes.Compare(c.GetResumeKey(), start) > 0 {
		start = c.GetResumeKey()
	}
	if !keys.Contains(d.GetStartKey(), d.GetEndKey(), start) {
		return applyResult{gc: &gcApplied{}} // the range shrank under a resumed pass
	}
	lo, hi := keys.VersionedSpan(start, d.GetEndKey())
	resume, st, err := mvcc.GC(ab.eng, ab.b, lo, hi, sp, int(c.GetBudget()))
	r.mustWrite(err)
	if resume != nil {
		resume = keys.UserKey(resume)
	}
	r.scanChunkForVersionBoundLocked(ab.eng, start, resume)
	r.store.stats.GCCommandsApplied.Add(1)
	r.store.stats.GCVersionsRemoved.Add(uint64(st.Versions))
	r.store.stats.GCBytesRemoved.Add(uint64(st.Bytes))
	return applyResult{gc: &gcApplied{resume: resume, stats: st}}
}

// flushAppliedLocked commits the apply batch so far together with the
// state it corresponds to (the previous entry's applied index), so a
// crash never replays an entry whose effects are already written, and
// starts afresh: for applies that must read the engine.
func (r *Replica) flushAppliedLocked(ab *applyBatch) error {
	r.saveVersionBoundLocked()
	if err := putProto(ab.b, keys.ReplicaStateKey(r.rangeID), r.mu.state); err != nil {
		return err
	}
	return ab.flush()
}
