package placement

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tidekv/tidekv/internal/units"
)

// The load-driven policies: splits (by size and by load), adaptive read
// replicas and merges.

// loadSplitCandidate returns the range to cut so that leases can spread the
// load, or nil. With two or more live nodes and every sample fresh, when
// even the best lease placement of the ranges as they are (the hottest
// first, each onto the least loaded node) leaves a node above
// (1+LoadSplitSlack) × the mean node load, the hottest range splits, if it
// serves at least LoadSplitMinQPS (sustained) and no single key dominates
// it. Two hot ranges on three nodes, far below SplitQPS, are cut until
// three nodes can share them; a cluster whose load can already be spread
// splits nothing (every range is another Raft group to run). One range per
// decision: the halves report afresh before the next is considered.
func (p *planner) loadSplitCandidate() (*Range, string) {
	live := len(p.liveNodes())
	if p.cfg.LoadSplitSlack == 0 || live < 2 {
		return nil, ""
	}
	var rs []*Range
	total := 0.0
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if r.LoadStale {
			return nil, "" // the totals are not known yet
		}
		if r.QPS > 0 {
			rs = append(rs, r)
			total += r.QPS
		}
	}
	if len(rs) == 0 {
		return nil, ""
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].QPS != rs[j].QPS {
			return rs[i].QPS > rs[j].QPS
		}
		return rs[i].ID < rs[j].ID
	})
	nodes := make([]float64, live)
	for _, r := range rs {
		least := 0
		for i := range nodes {
			if nodes[i] < nodes[least] {
				least = i
			}
		}
		nodes[least] += r.QPS
	}
	peak, mean, hot := 0.0, total/float64(live), rs[0]
	for _, v := range nodes {
		peak = math.Max(peak, v)
	}
	if peak <= (1+p.cfg.LoadSplitSlack)*mean || math.Min(hot.QPS, hot.HitsEWMA) < p.cfg.LoadSplitMinQPS || hot.HotKeyShare >= p.cfg.HotKeyShare {
		return nil, ""
	}
	return hot, fmt.Sprintf("%.0f qps: the best lease placement of %d ranges on %d nodes leaves one at %.0f qps, above %.0f (mean %.0f + %.0f%%)",
		hot.QPS, len(p.s.Ranges), live, peak, (1+p.cfg.LoadSplitSlack)*mean, mean, 100*p.cfg.LoadSplitSlack)
}

// mergeMaxQPS: two ranges merge only below this request rate together, so
// the merged range is not split again for load at once.
func (p *planner) mergeMaxQPS() float64 {
	if p.cfg.LoadSplitSlack > 0 {
		return math.Min(p.cfg.SplitQPS, p.cfg.LoadSplitMinQPS) / 2
	}
	return p.cfg.SplitQPS / 2
}

// splits keeps ranges bounded: by size (Θmax) and by load: above SplitQPS,
// or the loadSplitCandidate. Load must be sustained: both the last rate and
// the smoothed one are above the threshold, so a burst of a second or two
// splits nothing; and it must be a full window's sample of the current
// leaseholder (a stale one understates the load and may describe the range
// before its last split).
func (p *planner) splits() {
	hot, why := p.loadSplitCandidate()
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.taken[r.ID] {
			continue
		}
		qps := math.Min(r.QPS, r.HitsEWMA)
		switch {
		case r.Bytes > p.cfg.SplitBytes():
			p.add(Operator{Kind: OpSplit, Range: r.ID, Generation: r.Generation, Policy: "size-split",
				Reason: fmt.Sprintf("%s above the %s split line (%.3g%% of the %s maximum)", units.Human(r.Bytes), units.Human(p.cfg.SplitBytes()),
					100*p.cfg.SplitFill, units.Human(p.cfg.RangeMaxBytes))})
		case r == hot:
			p.add(Operator{Kind: OpSplit, Range: r.ID, Generation: r.Generation, SplitByLoad: true, Policy: "load-split", Reason: why})
		case r.LoadStale || qps <= p.cfg.SplitQPS:
		case r.HotKeyShare >= p.cfg.HotKeyShare:
			p.note("range %d: %.0f qps, %.0f%% on one key: no split spreads it (adaptive replicas may)", r.ID, qps, 100*r.HotKeyShare)
		default:
			p.add(Operator{Kind: OpSplit, Range: r.ID, Generation: r.Generation, SplitByLoad: true, Policy: "load-split",
				Reason: fmt.Sprintf("%.0f qps sustained above the %.0f threshold", qps, p.cfg.SplitQPS)})
		}
	}
}

// merges joins adjacent ranges that are together below Θmin and below
// mergeMaxQPS, live on the same voters with no learners, and did not split
// recently.
func (p *planner) merges() {
	maxQPS := p.mergeMaxQPS()
	rs := make([]*Range, 0, len(p.s.Ranges))
	for i := range p.s.Ranges {
		rs = append(rs, &p.s.Ranges[i])
	}
	sort.Slice(rs, func(i, j int) bool { return bytes.Compare(rs[i].Start, rs[j].Start) < 0 })
	count := len(rs)
	for i := 0; i+1 < len(rs) && count > p.cfg.MinRanges; i++ {
		l, r := rs[i], rs[i+1]
		if !bytes.Equal(l.End, r.Start) || len(l.End) == 0 || p.isBoundary(l.End) || l.Bytes+r.Bytes >= p.cfg.RangeMinBytes || !sameVoters(l, r) {
			continue
		}
		// A merged range must stay well below the load-split thresholds, or
		// it splits again as soon as it is merged; a stale sample may hide
		// its load.
		if l.LoadStale || r.LoadStale || l.QPS+r.QPS >= maxQPS {
			continue
		}
		if p.recentlySplit(l) || p.recentlySplit(r) {
			continue
		}
		if p.add(Operator{Kind: OpMerge, Range: l.ID, Other: r.ID, Policy: "merge",
			Reason: fmt.Sprintf("%s together, below the %s minimum", units.Human(l.Bytes+r.Bytes), units.Human(p.cfg.RangeMinBytes))}) {
			count--
			i++ // r is taken
		}
	}
}

func (p *planner) recentlySplit(r *Range) bool {
	return !r.SplitAt.IsZero() && p.s.Now.Sub(r.SplitAt) < p.cfg.MergeCooldown
}

// sameVoters: both ranges have only voters, on the same nodes.
func sameVoters(a, b *Range) bool {
	if len(a.Replicas) != len(b.Replicas) {
		return false
	}
	nodes := map[uint64]bool{}
	for _, rep := range a.Replicas {
		if rep.Type != Voter {
			return false
		}
		nodes[rep.Node] = true
	}
	for _, rep := range b.Replicas {
		if rep.Type != Voter || !nodes[rep.Node] {
			return false
		}
	}
	return true
}

// adaptive adds learner replicas to ranges with heavy, sustained read load
// that a load split will not spread (one hot key, or a rate below the split
// threshold), on the least-loaded nodes, and removes them when the range
// has cooled to half the threshold (the gap keeps them from flapping) and
// its other replicas served no more than that for RangeCooldown
// (ReplicaReadPeakQPS: a dip in a learner's reads is not a cooling).
func (p *planner) adaptive() {
	hot, _ := p.loadSplitCandidate()
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		// A stale sample (a new lease or span) reads near zero: acting on it
		// would drop learners that are still needed and add them back.
		if p.taken[r.ID] || r.LoadStale {
			continue
		}
		var adaptive []uint64
		for _, rep := range r.Replicas {
			if rep.Adaptive {
				adaptive = append(adaptive, rep.Node)
			}
		}
		// The range's reads are the leaseholder's and its other
		// replicas': judged on the leaseholder's alone, learners that took
		// the reads over would look idle and go.
		reads := math.Min(r.ReadQPS, r.HitsEWMA) + r.ReplicaReadQPS
		all := r.ReadQPS + r.ReplicaReadQPS
		// Above the split threshold now, a load split is coming (it waits
		// for the rate to be sustained): wait for it rather than copy.
		splitWillHelp := r == hot || r.QPS > p.cfg.SplitQPS && r.HotKeyShare < p.cfg.HotKeyShare
		// The learners the reads need: one per AdaptiveReadQPS of them, up
		// to the cap, all in this decision. Adding one per round would
		// wait for a fresh sample between them, and the sample after a
		// replica change is stale (its descriptor is new).
		want := min(p.cfg.MaxAdaptiveReplicas, int(math.Ceil(reads/p.cfg.AdaptiveReadQPS)))
		switch {
		case reads > p.cfg.AdaptiveReadQPS && !splitWillHelp && len(adaptive) < want:
			reason := fmt.Sprintf("%s above %.0f", readsOf(r), p.cfg.AdaptiveReadQPS)
			if want > len(adaptive)+1 {
				reason += fmt.Sprintf(": %d learners for the load", want-len(adaptive))
			}
			var ops []Operator
			for _, t := range p.leastLoaded(r, want-len(adaptive)) {
				ops = append(ops, Operator{Kind: OpAddLearner, Range: r.ID, Target: t, Bytes: r.Bytes, Policy: "adaptive-replicas", Reason: reason})
			}
			p.addTogether(ops)
		// With a replica's reads unknown the range may only look cool: the
		// learners stay until every replica's node reports again.
		case all < p.cfg.AdaptiveReadQPS/2 && r.ReplicaReadPeakQPS < p.cfg.AdaptiveReadQPS/2 && len(adaptive) > 0 && !r.ReplicaReadsUnknown && !p.learnerJustAdded(r.ID):
			victim := adaptive[0]
			for _, a := range adaptive[1:] {
				if p.qps[a] > p.qps[victim] {
					victim = a
				}
			}
			p.add(Operator{Kind: OpRemoveReplica, Range: r.ID, Source: victim, Policy: "adaptive-replicas",
				Reason: fmt.Sprintf("cooled to %s", readsOf(r))})
		}
	}
}

// learnerJustAdded reports whether range id got an adaptive learner within
// RangeCooldown: the reads a new learner takes over leave the
// leaseholder's report a window before they reach its node's, so the
// range would look cool in between.
func (p *planner) learnerJustAdded(id uint64) bool {
	for _, ro := range p.s.Recent {
		if ro.Op.Kind == OpAddLearner && ro.Op.Range == id && p.s.Now.Sub(ro.At) < p.cfg.RangeCooldown {
			return true
		}
	}
	return false
}

// readsOf says a range's read rate, and the other replicas' share of it
// when they serve some.
func readsOf(r *Range) string {
	if r.ReplicaReadQPS == 0 {
		return fmt.Sprintf("%.0f reads/s", r.ReadQPS)
	}
	return fmt.Sprintf("%.0f reads/s (%.0f at the leaseholder, %.0f at other replicas)", r.ReadQPS+r.ReplicaReadQPS, r.ReadQPS, r.ReplicaReadQPS)
}

// leastLoaded lists up to n live nodes without a replica of r, the lowest
// load score first (then QPS, then ID).
func (p *planner) leastLoaded(r *Range, n int) []uint64 {
	var nodes []*Node
	for i := range p.s.Nodes {
		if nd := &p.s.Nodes[i]; p.acceptsReplicas(nd.ID) && !has(r, nd.ID) {
			nodes = append(nodes, nd)
		}
	}
	slices.SortFunc(nodes, func(a, b *Node) int {
		return cmp.Or(cmp.Compare(a.Score, b.Score), cmp.Compare(p.qps[a.ID], p.qps[b.ID]), cmp.Compare(a.ID, b.ID))
	})
	var out []uint64
	for _, nd := range nodes[:min(n, len(nodes))] {
		out = append(out, nd.ID)
	}
	return out
}
