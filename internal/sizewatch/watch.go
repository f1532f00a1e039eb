package sizewatch

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/queue"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Size splits wait for two things: the meta range must learn that a range
// crossed its split line (range-split-fill × Θmax), and the control loop
// must run a round. With only the periodic report (ReportInterval) and
// round (Control.Interval), a range written at 13 MB/s reached 3.8 × Θmax
// before its split. So a leaseholder checks its ranges' sizes every
// SizeWatchInterval, reports a range the moment it crosses the line, and
// that report wakes the control loop for a placement-only round; writes
// that would take a range past Θmax meanwhile wait.

// Θmax is an invariant (docs/operations.md "Θmax"): what a range stores,
// counted as a snapshot ships it, never passes SplitBackpressure × Θmax,
// just below Θmax. Every request that may store bytes in a range (puts,
// deletes, whose tombstones stay until GC, batch writes, CAS, transaction
// intents, one-phase commits and records) is admitted against its range's
// write budget with a bound on the bytes it stores (growth), and holds its
// bound until it is applied; one that does not fit waits for the split
// and, when none comes in time, is refused as RANGE_BUSY (retried by the
// clients). This holds whether or not placement splits (rebalancing off: an
// operator's split frees the range), and a range whose budget is not known
// yet (just split off, or just led) holds its writes until it is: a
// new leaseholder asks for a size pass at once (LeaderAcquired). Only a
// leaseholder holds; a follower refuses as NOT_LEASEHOLDER. A request
// that passes here on a follower in the instant before it takes the lease
// is not held: it is proposed unchecked, within the margin
// SplitBackpressure leaves below Θmax.

// Node is what the size watch needs of the node it runs on.
type Node interface {
	// Replicas are the node's local replicas.
	Replicas() []*raftstore.Replica
	// Placement is the cluster's placement settings as they are now (Θmax,
	// the split fill).
	Placement() placement.Config
	// Crossed tells the node that led range d has crossed its split line,
	// storing n bytes: its load records the size and it reports the range
	// to the meta range.
	Crossed(d *tidekvpb.RangeDescriptor, n uint64)
	// ReplicaFor finds the local replica covering key.
	ReplicaFor(key []byte) (*raftstore.Replica, error)
	// RangeBusy is the refusal of a write held too long in range id
	// (RANGE_BUSY, with a retry hint).
	RangeBusy(id uint64) error
}

// Config is what the size watch takes from the node's configuration.
type Config struct {
	// SplitBackpressure is the share of Θmax above which writes wait for
	// the split (0: writes are not held); SplitBackpressureWait is how
	// long one waits before it is refused.
	SplitBackpressure     float64
	SplitBackpressureWait time.Duration
}

// Watch is a node's size watch: its ranges' sizes, the write budgets of
// the ranges it leads, and which of them crossed their split line.
type Watch struct {
	cfg  Config
	node Node
	m    *metrics.Set

	sizes   sizes
	budgets writeBudgets
	alerts  queue.SizeAlerts // the ranges reported since they crossed (internal/queue)
	hold    atomic.Bool      // budgets are kept and enforced
	wake    chan struct{}    // Poke
	// line and recount are the split line and RecountAfter as of the last
	// Round (0: none yet), so that sizing a range reads no settings: the
	// cluster's settings are read from the meta range's records in the
	// engine, an iterator each time.
	line, recount atomic.Uint64
}

// New is a size watch over node's ranges.
func New(cfg Config, node Node, m *metrics.Set) *Watch {
	return &Watch{cfg: cfg, node: node, m: m, wake: make(chan struct{}, 1)}
}

// Round reports, once per span, each range this node leads whose size has
// crossed Θmax since its last report said so (Node.Crossed), and renews
// the write budgets that hold writes above the backpressure limit.
func (w *Watch) Round(ctx context.Context) {
	cfg := w.node.Placement()
	limit, recount := cfg.SplitBytes(), recountAfter(cfg)
	w.line.Store(limit)
	w.recount.Store(recount)
	hold := w.cfg.SplitBackpressure > 0
	// Held ranges must be due to split, whatever the two settings say.
	holdAt := max(uint64(w.cfg.SplitBackpressure*float64(cfg.RangeMaxBytes)), limit+1)
	w.hold.Store(hold)
	led := map[uint64]bool{}
	for _, r := range w.node.Replicas() {
		d := r.Desc()
		if d == nil || r.RangeID() == keys.MetaRangeID || !r.IsLeader() {
			continue
		}
		id, written := r.RangeID(), r.WrittenBytes()
		size, err := w.sizes.size(ctx, r, recount, limit)
		if err == nil && hold && size.Stored >= holdAt {
			// Hold only on an exact count: the estimate counts overwrites
			// as growth.
			size, err = w.sizes.size(ctx, r, 1, limit)
		}
		n := size.Stored
		if err != nil {
			continue
		}
		led[id] = true
		if hold {
			w.budgets.set(id, d, written+subFloor(holdAt, n))
		}
		if !w.alerts.Crossed(id, d.GetStartKey(), d.GetEndKey(), n, limit) {
			continue
		}
		w.node.Crossed(d, n)
	}
	w.alerts.KeepOnly(led)
	w.budgets.keepOnly(func(id uint64) bool { return hold && led[id] })
}

// subFloor is a − b, or 0 when b ≥ a.
func subFloor(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

// writeBudgets are the led ranges' write budgets.
type writeBudgets struct {
	mu sync.Mutex
	m  map[uint64]*writeBudget
}

// writeBudget is how far a range's written-bytes counter may go, at one
// span, before its size estimate would pass SplitBackpressure × Θmax
// (known: set by the size watch), and the growth of the requests admitted
// against it and not yet done (admitted: their bytes may be applied or
// not). It is kept by span, as the size is (sizes.go): a replica change
// bumps the descriptor's generation and leaves the size as it was.
type writeBudget struct {
	known      bool
	start, end []byte
	written    uint64
	admitted   uint64
}

func (b *writeBudgets) set(id uint64, d *tidekvpb.RangeDescriptor, written uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[uint64]*writeBudget{}
	}
	wb := b.m[id]
	if wb == nil {
		wb = &writeBudget{}
		b.m[id] = wb
	}
	wb.known, wb.start, wb.end, wb.written = true, d.GetStartKey(), d.GetEndKey(), written
}

// keepOnly forgets the budgets of the ranges keep refuses; a range with
// requests still admitted keeps their count, its budget unknown.
func (b *writeBudgets) keepOnly(keep func(id uint64) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, wb := range b.m {
		switch {
		case keep(id):
		case wb.admitted > 0:
			wb.known = false
		default:
			delete(b.m, id)
		}
	}
}

// admit takes grow bytes of r's budget if they fit beside the requests
// admitted before; known is false when r has no budget yet, current when
// it is for r's span. One of an earlier span still binds: splits only
// shrink a range, and a merge happens only far below Θmax.
func (b *writeBudgets) admit(r *raftstore.Replica, grow uint64) (ok, known, current bool) {
	written, d := r.WrittenBytes(), r.Desc()
	b.mu.Lock()
	defer b.mu.Unlock()
	wb := b.m[r.RangeID()]
	if wb == nil || !wb.known {
		return false, false, false
	}
	current = bytes.Equal(wb.start, d.GetStartKey()) && bytes.Equal(wb.end, d.GetEndKey())
	if written+wb.admitted+grow > wb.written {
		return false, true, current
	}
	wb.admitted += grow
	return true, true, current
}

// release gives back what admit took once the request is done: its bytes
// are then in the range's written-bytes counter, or never will be.
func (b *writeBudgets) release(id, grow uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wb := b.m[id]; wb != nil {
		wb.admitted -= grow
	}
}

// Admit admits a request that may store up to grow bytes in key's
// range (r, found by the caller), holding it while the range has no room
// (a split is due and not done) or no budget yet, until the context's
// end or SplitBackpressureWait; then it is refused as RANGE_BUSY.
// CockroachDB holds writes the same way; without it, a range written
// faster than it can split outgrows Θmax many times over.
//
// It returns the replica the key belongs to once the request may go ahead
// (after a split that is often another range of this node), and done, to
// call once the request is over.
func (w *Watch) Admit(ctx context.Context, r *raftstore.Replica, key []byte, grow uint64) (*raftstore.Replica, func(), error) {
	if grow == 0 || !w.hold.Load() {
		return r, func() {}, nil
	}
	var t *time.Ticker
	var start, giveUp time.Time
	for {
		if !r.IsLeader() {
			// Budgets are kept by leaseholders only. Elsewhere the request
			// goes on to be refused as NOT_LEASEHOLDER with a hint, as
			// before: held here, it would come back as RANGE_BUSY and its
			// client would retry this same node.
			return r, func() {}, nil
		}
		ok, known, current := w.budgets.admit(r, grow)
		if !known || !current {
			w.Poke() // for a budget at this span now, rather than at the next tick
		}
		if ok {
			if t != nil {
				w.m.SplitWaits.WithLabelValues("split").Inc()
			}
			id := r.RangeID()
			return r, func() { w.budgets.release(id, grow) }, nil
		}
		if t == nil {
			w.Poke() // for an exact count now
			t = time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			start = time.Now()
			giveUp = start.Add(w.cfg.SplitBackpressureWait)
			if dl, ok := ctx.Deadline(); ok && dl.Add(-splitWaitMargin).Before(giveUp) {
				// Refused before the caller's deadline, the write is known
				// not to have happened; at the deadline it would be
				// ambiguous.
				giveUp = dl.Add(-splitWaitMargin)
			}
		}
		if !time.Now().Before(giveUp) {
			w.m.SplitWaits.WithLabelValues("refused").Inc()
			return nil, nil, w.node.RangeBusy(r.RangeID())
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-t.C:
		}
		var err error
		if r, err = w.node.ReplicaFor(key); err != nil {
			return nil, nil, err
		}
	}
}

// splitWaitMargin is how long before the caller's deadline a held write
// is refused.
const splitWaitMargin = 50 * time.Millisecond

// Poke asks for a size watch pass now (the loop that runs Round reads
// Woken).
func (w *Watch) Poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Woken receives a Poke.
func (w *Watch) Woken() <-chan struct{} { return w.wake }
