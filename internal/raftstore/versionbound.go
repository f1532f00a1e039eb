package raftstore

import (
	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
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
