package sizewatch

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Range sizes. Placement splits a range above Θmax, so its size must not
// read low. The engine's estimate (SST files) misses what still sits in
// the memtable; under a steady write load that let ranges grow past Θmax.
// A range's size here is an exact count of what its data span stores (every
// version, tombstone, intent and transaction record, memtable included:
// the bytes a snapshot ships, raftstore.DataSize) plus the bytes the
// commands applied since that count stored: an upper bound, since an
// overwrite or a delete only counts as growth. The live bytes (what a read
// finds, which eviction weighs against a key space's capacity) are bounded
// the same way. The count is redone when the range's span changes (a
// split, a merge, even a split merged back to the span counted: the writes
// the other side took meanwhile are in no counter of this replica), when
// a snapshot replaces the data, and when the writes since it could have
// added a quarter of the range's counted size (at least minRecountBytes,
// at most a quarter of Θmax) and either the bound has reached the split
// line or recountGap has passed since the count. So at and above the split
// line, where the report of a crossed range, placement's split by size
// and the write budgets decide, the bound is never more than Θmax/4 above
// the stored size, and a scan costs at most four bytes read per byte
// written (plus at most four times minRecountBytes for a nearly empty
// range). Below it nothing is decided on the bound but merges and what
// `ctl keyspace list` shows (the key count of the last count: with Θmax/4
// alone a cache's range of a few hundred KiB was counted again only after
// 16 MiB of writes, and showed half its keys), so there a range is counted
// at most once per recountGap: under a steady write load the quarter rule
// alone rescanned each growing range four bytes per byte written, half of
// the periodic loops' CPU in BenchmarkRF3Put (docs/benchmarks/cost.md). A
// replica change (a learner added, a voter moved) bumps the descriptor's
// generation but leaves the span and the data as they were, so the count
// stands: redone at every generation, it scanned each range a rebalancing
// touched in full.

// Replica is what a size estimate needs of a replica.
type Replica interface {
	RangeID() uint64
	WrittenBytes() uint64
	SnapshotsApplied() uint64
	// SpanChanges counts the changes of the replica's span (splits and
	// merges applied, snapshots of another span).
	SpanChanges() uint64
	// DataSize counts the range's data in its layout.
	DataSize(ctx context.Context) (raftstore.DataSize, error)
}

// sizes holds each local range's last exact count.
type sizes struct {
	now func() time.Time // the clock of recountGap (nil: time.Now)
	mu  sync.Mutex
	m   map[uint64]sizeCount
}

type sizeCount struct {
	// rep is the replica counted: the counters below are its own, and
	// mean nothing to another replica of the range (one removed from this
	// node and added back).
	rep   Replica
	spans uint64 // its SpanChanges at the count
	snaps uint64 // its SnapshotsApplied at the count
	n     raftstore.DataSize
	// written is its WrittenBytes at the count.
	written uint64
	at      time.Time // when the count started
}

// size returns the size of r's range, counting it afresh when the last
// count is for another span, or when the writes since may have added
// recountAfter bytes and either the size with them reaches line or the
// count is recountGap old. Its Stored and Live bytes are upper bounds, its
// Keys those of the last count.
func (rs *sizes) size(ctx context.Context, r Replica, recountAfter, line uint64) (raftstore.DataSize, error) {
	id, written, snaps, spans := r.RangeID(), r.WrittenBytes(), r.SnapshotsApplied(), r.SpanChanges()
	rs.mu.Lock()
	c, ok := rs.m[id]
	rs.mu.Unlock()
	if ok && c.rep == r && c.spans == spans && c.snaps == snaps && written >= c.written {
		n, grown := c.n, written-c.written
		n.Stored += grown
		n.Live += grown
		due := grown >= min(recountAfter, max(c.n.Stored/4, minRecountBytes))
		if !due || n.Stored < line && rs.clock().Sub(c.at) < recountGap {
			return n, nil
		}
	}
	return rs.exact(ctx, r)
}

// recountGap is the least time between two counts of a range whose size
// is below its split line.
const recountGap = 10 * time.Second

func (rs *sizes) clock() time.Time {
	if rs.now == nil {
		return time.Now()
	}
	return rs.now()
}

// exact counts r's range afresh: eviction decides on exact counts, since
// the deletes it proposes never lower the estimate.
func (rs *sizes) exact(ctx context.Context, r Replica) (raftstore.DataSize, error) {
	// Read before the count: a write, snapshot or span change during it
	// makes the next size count again.
	written, snaps, spans, at := r.WrittenBytes(), r.SnapshotsApplied(), r.SpanChanges(), rs.clock()
	n, err := r.DataSize(ctx)
	if err != nil {
		return n, err
	}
	rs.mu.Lock()
	if rs.m == nil {
		rs.m = map[uint64]sizeCount{}
	}
	rs.m[r.RangeID()] = sizeCount{rep: r, spans: spans, snaps: snaps, n: n, written: written, at: at}
	rs.mu.Unlock()
	return n, nil
}

// keys is the key count of range id's last exact count (0: none).
func (rs *sizes) keys(id uint64) uint64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.m[id].n.Keys
}

// forget drops the counts of ranges no longer local.
func (rs *sizes) forget(local map[uint64]bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	maps.DeleteFunc(rs.m, func(id uint64, _ sizeCount) bool { return !local[id] })
}

// minRecountBytes is the fewest bytes written that trigger a recount.
const minRecountBytes = 16 << 10

// RecountAfter is the most bytes written since a range's last exact count
// before the next: a quarter of Θmax (as of the last Round).
func (w *Watch) RecountAfter() uint64 {
	if n := w.recount.Load(); n != 0 {
		return n
	}
	return recountAfter(w.node.Placement())
}

func recountAfter(cfg placement.Config) uint64 { return max(cfg.RangeMaxBytes/4, 1) }

// RangeSize bounds what r's range stores (Size).
func (w *Watch) RangeSize(r Replica, recountAfter uint64) (uint64, error) {
	n, err := w.Size(context.Background(), r, recountAfter)
	return n.Stored, err
}

// Size returns the size of r's range, counting it afresh when the last
// count is for another span, or when the writes since may have added
// recountAfter bytes and either the size with them reaches the split line
// (as of the last Round; before the first, every size is at the line) or
// the count is recountGap old: its Stored and Live bytes are upper bounds,
// its Keys those of the last count.
func (w *Watch) Size(ctx context.Context, r Replica, recountAfter uint64) (raftstore.DataSize, error) {
	return w.sizes.size(ctx, r, recountAfter, w.line.Load())
}

// ExactSize counts r's range afresh.
func (w *Watch) ExactSize(ctx context.Context, r Replica) (raftstore.DataSize, error) {
	return w.sizes.exact(ctx, r)
}

// Keys is the key count of range id's last exact count (0: none).
func (w *Watch) Keys(id uint64) uint64 { return w.sizes.keys(id) }

// Forget drops the counts of ranges no longer local.
func (w *Watch) Forget(local map[uint64]bool) { w.sizes.forget(local) }
