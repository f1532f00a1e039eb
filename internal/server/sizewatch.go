package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
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

// watchSizes reports, once per descriptor generation, each range this
// node leads whose size has crossed Θmax since its last report said so,
// and renews the write budgets that hold writes above the backpressure
// limit.
func (s *Server) watchSizes(context.Context) {
	cfg := s.clusterConfig().Placement
	limit, recount := cfg.SplitBytes(), s.recountAfter()
	hold := s.cfg.SplitBackpressure > 0 && cfg.Rebalance
	// Held ranges must be due to split, whatever the two settings say.
	holdAt := max(uint64(s.cfg.SplitBackpressure*float64(cfg.RangeMaxBytes)), limit+1)
	s.holdWrites.Store(hold)
	led := map[uint64]bool{}
	for _, r := range s.store.Replicas() {
		d := r.Desc()
		if d == nil || r.RangeID() == keys.MetaRangeID || !r.IsLeader() {
			continue
		}
		id, gen, written := r.RangeID(), d.GetGeneration(), r.WrittenBytes()
		n, err := s.rangeSize(r, gen, recount)
		if err == nil && hold && n >= holdAt {
			// Hold only on an exact count: the estimate counts overwrites
			// as growth.
			n, err = s.rangeSize(r, gen, 1)
		}
		if err != nil {
			continue
		}
		led[id] = true
		if hold {
			s.budgets.Store(id, writeBudget{gen: gen, written: written + subFloor(holdAt, n)})
		}
		if !s.queues.sizes.Crossed(id, gen, n, limit) {
			continue
		}
		s.load.mu.Lock()
		if l, ok := s.load.ranges[id]; ok && l.gen == gen {
			l.bytes = n
			s.load.ranges[id] = l
		}
		s.load.mu.Unlock()
		s.queueReport(d)
	}
	s.queues.sizes.KeepOnly(led)
	s.budgets.Range(func(k, _ any) bool {
		if id := k.(uint64); !hold || !led[id] {
			s.budgets.Delete(id)
		}
		return true
	})
}

// subFloor is a − b, or 0 when b ≥ a.
func subFloor(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

// writeBudget is how far a range's written-bytes counter may go, at one
// descriptor generation, before writes wait for its split: its size
// estimate would then pass SplitBackpressure × Θmax.
type writeBudget struct{ gen, written uint64 }

// awaitSplit holds a write to r's range while the range is over its write
// budget (a split is due and not done), until the split, the context's
// end or SplitBackpressureWait; then the write is refused as RANGE_BUSY.
// CockroachDB holds writes the same way; without it, a range written
// faster than it can split outgrows Θmax many times over. A range whose
// budget is not known yet (just split off, or just led) holds its writes
// for at most one SizeWatchInterval while the size watch sets it.
//
// It returns the replica the key belongs to once the write may go ahead:
// after a split that is often another range of this node.
func (s *Server) awaitSplit(ctx context.Context, r *raftstore.Replica, key []byte) (*raftstore.Replica, error) {
	over, known := s.overBudget(r)
	if !over && known {
		return r, nil
	}
	if err := s.holdForSplit(ctx, r); err != nil {
		return nil, err
	}
	return s.replicaFor(key)
}

// splitWaitMargin is how long before the caller's deadline a held write
// is refused; rangeBusyRetryMs is the retry hint of the refusal.
const (
	splitWaitMargin  = 50 * time.Millisecond
	rangeBusyRetryMs = 50
)

// holdForSplit waits until r's range is within its budget, or its budget
// stays unknown for a SizeWatchInterval.
func (s *Server) holdForSplit(ctx context.Context, r *raftstore.Replica) error {
	s.pokeSizes() // for an exact count now, rather than at the next tick
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	giveUp := start.Add(s.cfg.SplitBackpressureWait)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-splitWaitMargin).Before(giveUp) {
		// Refused before the caller's deadline, the write is known not
		// to have happened; at the deadline it would be ambiguous.
		giveUp = dl.Add(-splitWaitMargin)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		over, known := s.overBudget(r)
		waited := time.Since(start)
		switch {
		case !known && waited >= s.cfg.SizeWatchInterval:
			return nil // the watch could not size it: never hold blind
		case known && !over:
			s.metrics.splitWaits.WithLabelValues("split").Inc()
			return nil
		case !time.Now().Before(giveUp):
			s.metrics.splitWaits.WithLabelValues("refused").Inc()
			return withDetail(codes.ResourceExhausted, fmt.Sprintf("range %d is above its size limit and its split is late, retry", r.RangeID()),
				&tidekvpb.ErrorDetail{Kind: tidekvpb.ErrorKind_RANGE_BUSY, RetryAfterMs: rangeBusyRetryMs})
		}
	}
}

// overBudget reports whether r's range is over its write budget, and
// whether the budget is known. A budget set at an earlier generation of
// the same range still binds: splits only shrink a range, and a merge
// happens only far below Θmax. The size watch is asked at once to size a
// range it has no budget for at this generation.
func (s *Server) overBudget(r *raftstore.Replica) (over, known bool) {
	if !s.holdWrites.Load() {
		return false, true
	}
	v, ok := s.budgets.Load(r.RangeID())
	d := r.Desc()
	if !ok || d == nil || d.GetGeneration() != v.(writeBudget).gen {
		s.pokeSizes()
	}
	if !ok {
		return false, false
	}
	return r.WrittenBytes() >= v.(writeBudget).written, true
}

// placeLoop runs a control round every Control.Interval, and a
// placement-only round when woken, at most one per SizeWatchInterval so a
// burst of reports cannot keep the loop busy.
func (s *Server) placeLoop() {
	s.wakeableLoop(s.cfg.Control.Interval, s.cfg.SizeWatchInterval, s.placeWake, s.place, s.placeUrgent)
}

// sizeLoop watches sizes every SizeWatchInterval, and at once (at most
// every sizePokeGap) when a write finds its range without a budget: a
// range just split or just led, whose writes would otherwise go unchecked
// until the next tick.
func (s *Server) sizeLoop() {
	s.pokeSizes() // a first pass at once: budgets from the start
	s.wakeableLoop(s.cfg.SizeWatchInterval, sizePokeGap, s.sizeWake, s.watchSizes, s.watchSizes)
}

const sizePokeGap = 20 * time.Millisecond

// pokeSizes asks for a size watch pass now.
func (s *Server) pokeSizes() {
	select {
	case s.sizeWake <- struct{}{}:
	default:
	}
}

// wakeableLoop runs onTick every interval and onWake when woken, no sooner
// than gap after the previous onWake.
func (s *Server) wakeableLoop(every, gap time.Duration, wake <-chan struct{}, onTick, onWake func(context.Context)) {
	s.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		var wokenAt time.Time
		for {
			select {
			case <-s.stopper:
				return
			case <-t.C:
				s.runBounded(every, onTick)
			case <-wake:
				if wait := time.Until(wokenAt.Add(gap)); wait > 0 {
					select {
					case <-s.stopper:
						return
					case <-time.After(wait):
					}
				}
				wokenAt = time.Now()
				s.runBounded(every, onWake)
			}
		}
	})
}

// wakePlace asks the control loop for an early placement round.
func (s *Server) wakePlace() {
	select {
	case s.placeWake <- struct{}{}:
	default: // a round is already due
	}
}
