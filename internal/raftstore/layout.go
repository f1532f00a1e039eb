package raftstore

import (
	"context"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/storage"
)

// Data layouts. A range's user data is either unversioned (one engine key
// per user key under keys.DataKey: the ranges of a cluster begun before log
// version 4) or versioned (internal/mvcc versions of keys.VersionedKey).
// The layout is replicated state (ReplicaState.layout): a new cluster's
// user ranges begin versioned (Store.Bootstrap), an older cluster's move
// to it by one MigrateLayout entry each (migrate.go), the right half of a
// split inherits it, and a snapshot carries it. Reads run beside apply, so they
// learn the layout from an atomic view that changes around the commit
// that moves the data (readLayout). Destroying the replica is the last
// such change: its view is gone from before the data is cleared, and
// stays so.

// layoutView is a replica's layout as reads see it.
type layoutView struct {
	mvcc bool
	// moving is non-nil from the apply that changes the data's layout
	// (a migration, a snapshot) until its batch is committed; closed then.
	moving chan struct{}
	// gone: the replica is destroyed; reads get RangeNotFoundError.
	gone bool
}

func isMVCC(st *tidekvpb.ReplicaState) bool {
	return st.GetLayout() == tidekvpb.DataLayout_DATA_LAYOUT_MVCC
}

// publishLayoutLocked sets the read view from the replicated state.
func (r *Replica) publishLayoutLocked() {
	r.layout.Store(&layoutView{mvcc: isMVCC(r.mu.state)})
}

// beginLayoutChangeLocked is called where an apply changes how the range's
// data is stored, before the change is committed: reads wait until the
// returned function, called once it is, publishes the new layout. The
// scheduler applies one change of a replica at a time, so nothing else
// publishes in between.
func (r *Replica) beginLayoutChangeLocked(versioned bool) (done func()) {
	moving := make(chan struct{})
	next := &layoutView{mvcc: versioned}
	cur := &layoutView{mvcc: next.mvcc, moving: moving}
	r.layout.Store(cur)
	return func() {
		// A migration publishes after r.mu is released; the replica may
		// have been destroyed since, and must stay gone.
		r.layout.CompareAndSwap(cur, next)
		close(moving)
	}
}

// publishGoneLocked is called by destroyReplicaLocked before the batch
// clearing the data commits: a read that took its view earlier finds it
// changed once it has read (stillLayout) and then gets RangeNotFoundError,
// instead of answering from the cleared span.
func (r *Replica) publishGoneLocked() {
	r.layout.Store(&layoutView{mvcc: r.layout.Load().mvcc, gone: true})
}

// readLayout returns the view a read should use, waiting while the data is
// moving. A read is valid if the view is still current once it has read
// (stillLayout): no layout change was committed in between.
func (r *Replica) readLayout(ctx context.Context) (*layoutView, error) {
	for {
		v := r.layout.Load()
		if v.gone {
			return nil, &RangeNotFoundError{RangeID: r.rangeID}
		}
		if v.moving == nil {
			return v, nil
		}
		select {
		case <-v.moving:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.store.stopper:
			return nil, ErrStopped
		}
	}
}

func (r *Replica) stillLayout(v *layoutView) bool { return r.layout.Load() == v }

// layoutSnapshot pins the engine for a read: a snapshot taken while the
// view it returns was current, so of data in that layout and not of a
// destroyed replica's cleared span.
func (r *Replica) layoutSnapshot(ctx context.Context) (*layoutView, storage.Snapshot, error) {
	for {
		v, err := r.readLayout(ctx)
		if err != nil {
			return nil, nil, err
		}
		snap := r.store.eng.NewSnapshot()
		if r.stillLayout(v) {
			return v, snap, nil
		}
		snap.Close()
	}
}

// VersionedLayout reports whether the range's data is on the versioned
// layout (as of its last committed apply).
func (r *Replica) VersionedLayout() bool { return r.layout.Load().mvcc }

// dataSpan is the engine span holding the data of the range d in a layout.
func dataSpan(d *tidekvpb.RangeDescriptor, versioned bool) (lo, hi []byte) {
	if versioned {
		return mvcc.EngineSpan(keys.VersionedSpan(d.GetStartKey(), d.GetEndKey()))
	}
	return keys.DataSpan(d.GetRangeId(), d.GetStartKey(), d.GetEndKey())
}

// clearRangeData deletes the data of the range d in both layouts, so no
// key of an earlier layout outlives a replica or a snapshot. The meta
// range has no versioned data (its empty bounds would span all of it).
func clearRangeData(w storage.Writer, d *tidekvpb.RangeDescriptor) error {
	lo, hi := dataSpan(d, false)
	if err := w.DeleteRange(lo, hi); err != nil || d.GetRangeId() == keys.MetaRangeID {
		return err
	}
	lo, hi = dataSpan(d, true)
	return w.DeleteRange(lo, hi)
}

// DataSpan is the engine span holding the range's data in its current
// layout (for size estimates).
func (r *Replica) DataSpan() (lo, hi []byte) {
	return dataSpan(r.desc.Load(), r.VersionedLayout())
}

// DataSize is what a range's data holds.
type DataSize struct {
	// Live: the user key and value bytes a read at the newest timestamp
	// finds; Keys: those keys.
	Live, Keys uint64
	// Stored: the engine key and value bytes of everything in the range's
	// data span (every version, tombstone, intent and transaction record):
	// what a snapshot ships, and what placement holds against Θmax.
	Stored uint64
}

// DataSize counts the range's data.
func (r *Replica) DataSize(ctx context.Context) (DataSize, error) {
	for {
		v, err := r.readLayout(ctx)
		if err != nil {
			return DataSize{}, err
		}
		n, err := dataSize(r.store.eng, r.desc.Load(), v.mvcc)
		if r.stillLayout(v) {
			return n, err
		}
	}
}

func dataSize(eng storage.Reader, d *tidekvpb.RangeDescriptor, versioned bool) (DataSize, error) {
	if versioned {
		lo, hi := keys.VersionedSpan(d.GetStartKey(), d.GetEndKey())
		st, err := mvcc.ComputeStats(eng, lo, hi)
		// Each live key counts its keys.VersionedKey prefix byte too.
		return DataSize{Live: uint64(st.LiveBytes - st.LiveKeys), Keys: uint64(st.LiveKeys), Stored: uint64(st.TotalBytes + st.RecordBytes)}, err
	}
	lo, hi := dataSpan(d, false)
	it, err := eng.NewIter(lo, hi)
	if err != nil {
		return DataSize{}, err
	}
	var n DataSize
	for ok := it.First(); ok; ok = it.Next() {
		n.Live += uint64(len(keys.UserKey(it.Key())) + len(it.Value()))
		n.Stored += uint64(len(it.Key()) + len(it.Value()))
		n.Keys++
	}
	return n, it.Close()
}

func logTimestamp(t hlc.Timestamp) *tidekvpb.LogTimestamp {
	return &tidekvpb.LogTimestamp{WallNanos: t.WallTime, Logical: t.Logical}
}

// commandTimestamp is the timestamp a command carries (nil or zero: none).
func commandTimestamp(ts *tidekvpb.LogTimestamp) hlc.Timestamp {
	return hlc.Timestamp{WallTime: ts.GetWallNanos(), Logical: ts.GetLogical()}
}
