package raftstore

import (
	"bytes"
	"log"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// The version bound is an upper bound on the timestamps of a range's
// versions. A blind write stamped above it cannot be too old (no version
// of its key is at or above its timestamp), so its apply need not read
// the key's newest version: a point read per written key on every
// replica, the largest cost the versioned layout added to writes.
//
// Every replica keeps it from what it applies (writes, migration), a
// split's right half inherits the left's, a merge takes the higher of
// the two, and snapshots carry it. It is persisted with the applied
// index it holds at (ReplicaState.version_bound_index): a binary that
// does not keep it advances the applied index alone, and the bound is
// then unknown, which costs the read and nothing else.
type versionBound struct {
	ts    hlc.Timestamp
	known bool
}

// versionBoundOf is the bound st records; nil st is a new, empty range.
func versionBoundOf(st *tidekvpb.ReplicaState) versionBound {
	if st == nil {
		return versionBound{known: true}
	}
	if st.GetAppliedIndex() == 0 || st.GetVersionBoundIndex() != st.GetAppliedIndex() {
		return versionBound{}
	}
	return versionBound{ts: commandTimestamp(st.GetVersionBound()), known: true}
}

// recordVersionBound stores b in st at st's applied index.
func recordVersionBound(st *tidekvpb.ReplicaState, b versionBound) {
	if !b.known {
		st.VersionBound, st.VersionBoundIndex = nil, 0
		return
	}
	st.VersionBound, st.VersionBoundIndex = logTimestamp(b.ts), st.GetAppliedIndex()
}

// below reports whether every version is below ts.
func (b versionBound) below(ts hlc.Timestamp) bool { return b.known && b.ts.Less(ts) }

// note raises the bound to a version written at ts.
func (b *versionBound) note(ts hlc.Timestamp) {
	if b.ts.Less(ts) {
		b.ts = ts
	}
}

// merged is the bound of a range holding both b's and o's versions.
func (b versionBound) merged(o versionBound) versionBound {
	b.note(o.ts)
	b.known = b.known && o.known
	return b
}

// loadVersionBoundLocked takes the bound from the replica's state (new,
// loaded or from a snapshot).
func (r *Replica) loadVersionBoundLocked() {
	r.mu.versionBound = versionBoundOf(r.mu.state)
	r.mu.boundScan = boundScan{} // the data it read may be gone
	b := r.mu.versionBound
	r.versionBound.Store(&b)
}

// saveVersionBoundLocked records the replica's bound in its state, which
// the caller is about to persist, and publishes it for a merge to read.
func (r *Replica) saveVersionBoundLocked() {
	recordVersionBound(r.mu.state, r.mu.versionBound)
	b := r.mu.versionBound
	r.versionBound.Store(&b)
}

// publishedVersionBound is the bound as of the replica's last persisted
// state: final once it is frozen for a merge.
func (r *Replica) publishedVersionBound() versionBound {
	if b := r.versionBound.Load(); b != nil {
		return *b
	}
	return versionBound{}
}

// An unknown bound would otherwise stay unknown for good: later writes
// raise its timestamp but cannot vouch for the versions already there. A
// GC pass reads a range's versions anyway, chunk by chunk in key order
// from the range's start; while the bound is unknown, each chunk also
// notes the newest version it covers, and a pass that reaches the range's
// end makes the bound known: every version was in a chunk when it was
// read or arrived later and raised the bound's timestamp as it applied
// (a merge's right half lies past the left's keys, so later chunks read
// it; a snapshot replaces the data and ends the scan). Only while the
// bound is unknown does GC read its chunks twice.
type boundScan struct {
	active bool
	next   []byte // the user key the next chunk must start at
	newest hlc.Timestamp
}

// scanChunkForVersionBoundLocked takes a GC chunk of user keys [start,
// next) (next nil: to the range's end), read from eng.
func (r *Replica) scanChunkForVersionBoundLocked(eng storage.Reader, start, next []byte) {
	s := &r.mu.boundScan
	d := r.mu.state.GetDesc()
	switch {
	case r.mu.versionBound.known:
		*s = boundScan{}
		return
	case bytes.Equal(start, d.GetStartKey()):
		*s = boundScan{active: true}
	case !s.active || !bytes.Equal(start, s.next):
		*s = boundScan{} // not the chunk the scan is at: wait for a new pass
		return
	}
	end := next
	if end == nil {
		end = d.GetEndKey()
	}
	newest, err := newestVersionIn(eng, start, end)
	if err != nil {
		log.Fatalf("range %d: read during apply: %v", r.rangeID, err)
	}
	s.newest = maxTS(s.newest, newest)
	if next != nil {
		s.next = next
		return
	}
	r.mu.versionBound.note(s.newest)
	r.mu.versionBound.known = true
	*s = boundScan{}
}

// newestVersionIn is the highest timestamp among the versions (intents
// included, transaction records not) of user keys [start, end) (end nil:
// unbounded).
func newestVersionIn(eng storage.Reader, start, end []byte) (hlc.Timestamp, error) {
	lo, hi := keys.VersionedSpan(start, end)
	it, err := eng.NewIter(mvcc.EngineSpan(lo, hi))
	if err != nil {
		return hlc.Timestamp{}, err
	}
	var newest hlc.Timestamp
	for ok := it.First(); ok; ok = it.Next() {
		if mvcc.IsRecordKey(it.Key()) {
			continue // a transaction's record, beside its anchor's versions
		}
		_, ts, err := mvcc.DecodeKey(it.Key())
		if err != nil {
			it.Close()
			return hlc.Timestamp{}, err
		}
		newest = maxTS(newest, ts)
	}
	return newest, it.Close()
}
