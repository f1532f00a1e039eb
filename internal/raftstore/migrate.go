package raftstore

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
)

// Migration to the versioned layout. Once the cluster runs at log version
// 4, each user range's leaseholder proposes one MigrateLayout entry (the
// server's upkeep loop): at apply every replica rewrites the range's
// unversioned keys as versions at the entry's timestamp, deletes them, and
// records the versioned layout, all in the apply batch. A range is at most
// Θmax, so this is one bounded apply (docs/transactions.md has the time it
// takes); writes after it in the same batch see the migrated data through
// applyBatch.migrated.

// MigrateLayout moves the range's data to the versioned layout; a range
// already there is left alone. Only the leaseholder proposes it.
func (r *Replica) MigrateLayout(ctx context.Context) error {
	switch {
	case r.rangeID == keys.MetaRangeID:
		return fmt.Errorf("%w: the meta range keeps its unversioned layout", ErrInvalidRequest)
	case r.VersionedLayout():
		return nil
	}
	if err := r.store.needVersion(LogVersionMVCC, "the versioned data layout"); err != nil {
		return err
	}
	_, err := r.propose(ctx, &tidekvpb.RaftCommand{MigrateLayout: &tidekvpb.MigrateLayoutCommand{},
		Timestamp: logTimestamp(r.store.hlc.Now())}, nil)
	return err
}

// applyMigrateLocked rewrites the range's data as versions at the
// command's timestamp. Whether it does depends on the command and the
// replica state only.
func (r *Replica) applyMigrateLocked(ab *applyBatch, cmd *tidekvpb.RaftCommand) (applyResult, []func()) {
	ts := commandTimestamp(cmd.GetTimestamp())
	switch {
	case isMVCC(r.mu.state):
		return applyResult{}, nil
	case r.rangeID == keys.MetaRangeID || ts.IsZero():
		return applyResult{err: fmt.Errorf("%w: range %d cannot migrate (meta range, or no timestamp)", ErrInvalidRequest, r.rangeID)}, nil
	}
	start := time.Now() // for the log line only
	d := r.mu.state.GetDesc()
	lo, hi := keys.DataSpan(r.rangeID, d.GetStartKey(), d.GetEndKey())
	var n, size int
	var vk []byte
	err := ab.eachKey(lo, hi, func(k, v []byte) error {
		n, size = n+1, size+len(k)+len(v)
		vk = keys.AppendVersionedKey(vk[:0], keys.UserKey(k))
		return mvcc.Put(ab.b, vk, ts, v)
	})
	if err == nil {
		err = ab.b.DeleteRange(lo, hi)
	}
	r.mustWrite(err)
	ab.migrated[r.rangeID] = ts
	r.mu.versionBound.note(ts)
	r.mu.state.Layout = tidekvpb.DataLayout_DATA_LAYOUT_MVCC
	log.Printf("range %d: data moved to the versioned layout at %s: %d keys, %d bytes, applied in %v",
		r.rangeID, ts, n, size, time.Since(start).Round(time.Millisecond))
	return applyResult{}, []func(){r.beginLayoutChangeLocked(true)}
}
