package placement

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"github.com/tidekv/tidekv/internal/units"
)

// The load-driven policies: splits (by size and by load), adaptive read
// replicas and merges.

// splitThreshold is the request rate above which a range splits by load:
// SplitQPS, or, with two or more live nodes, LoadSplitShare of the mean
// node load when that is lower (but at least LoadSplitMinQPS). A cluster
// whose load sits on fewer hot ranges than it has nodes cannot spread it by
// moving leases; cutting those ranges lets it. The mean is taken over the
// fresh samples only; exact is false when some are stale (just after a
// split both halves report nothing), and the threshold then understates:
// splits fall back to SplitQPS, merges and adaptive replicas may use it
// (it only makes them rarer).
func (p *planner) splitThreshold() (threshold float64, exact bool) {
	live, total, exact := 0, 0.0, true
	for _, n := range p.s.Nodes {
		if n.State == NodeLive {
			live++
		}
	}
	for _, r := range p.s.Ranges {
		if r.LoadStale {
			exact = false
			continue
		}
		total += r.QPS
	}
	if live < 2 || p.cfg.LoadSplitShare == 0 {
		return p.cfg.SplitQPS, true
	}
	return math.Min(p.cfg.SplitQPS, math.Max(p.cfg.LoadSplitMinQPS, p.cfg.LoadSplitShare*total/float64(live))), exact
}

// splitQPS is the threshold splits act on.
func (p *planner) splitQPS() float64 {
	if t, exact := p.splitThreshold(); exact {
		return t
	}
	return p.cfg.SplitQPS
}

// splits keeps ranges bounded: by size (Θmax) and by load. Load must be
// sustained: both the last rate and the smoothed one are above the
// threshold, so a burst of a second or two splits nothing; and it must be a
// full window's sample of the current leaseholder (a stale one understates
// the load and may describe the range before its last split).
func (p *planner) splits() {
	threshold := p.splitQPS()
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.taken[r.ID] {
			continue
		}
		qps := math.Min(r.QPS, r.HitsEWMA)
		switch {
		case r.Bytes > p.cfg.RangeMaxBytes:
			p.add(Operator{Kind: OpSplit, Range: r.ID, Policy: "size-split",
				Reason: fmt.Sprintf("%s above the %s maximum", units.Human(r.Bytes), units.Human(p.cfg.RangeMaxBytes))})
		case r.LoadStale || qps <= threshold:
		case r.HotKeyShare >= p.cfg.HotKeyShare:
			p.note("range %d: %.0f qps, %.0f%% on one key: no split spreads it (adaptive replicas may)", r.ID, qps, 100*r.HotKeyShare)
		default:
			p.add(Operator{Kind: OpSplit, Range: r.ID, SplitByLoad: true, Policy: "load-split",
				Reason: fmt.Sprintf("%.0f qps sustained above the %.0f threshold", qps, threshold)})
		}
	}
}

// merges joins adjacent ranges that are together below Θmin and below half
// the load-split threshold, live on the same voters with no learners, and
// did not split recently.
func (p *planner) merges() {
	threshold, _ := p.splitThreshold()
	rs := make([]*Range, 0, len(p.s.Ranges))
	for i := range p.s.Ranges {
		rs = append(rs, &p.s.Ranges[i])
	}
	sort.Slice(rs, func(i, j int) bool { return bytes.Compare(rs[i].Start, rs[j].Start) < 0 })
	count := len(rs)
	for i := 0; i+1 < len(rs) && count > p.cfg.MinRanges; i++ {
		l, r := rs[i], rs[i+1]
		if !bytes.Equal(l.End, r.Start) || len(l.End) == 0 || l.Bytes+r.Bytes >= p.cfg.RangeMinBytes || !sameVoters(l, r) {
			continue
		}
		// A merged range must stay well below the load-split threshold, or
		// it splits again as soon as it is merged; a stale sample may hide
		// its load.
		if l.LoadStale || r.LoadStale || l.QPS+r.QPS >= threshold/2 {
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
// has cooled to half the threshold (the gap keeps them from flapping).
func (p *planner) adaptive() {
	// A stale sample understates the threshold: a split is then only more
	// likely to be coming, and waiting for it copies no data.
	threshold, _ := p.splitThreshold()
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.taken[r.ID] {
			continue
		}
		var adaptive []uint64
		for _, rep := range r.Replicas {
			if rep.Adaptive {
				adaptive = append(adaptive, rep.Node)
			}
		}
		reads := math.Min(r.ReadQPS, r.HitsEWMA)
		// Above the split threshold now, a load split is coming (it waits
		// for the rate to be sustained): wait for it rather than copy.
		splitWillHelp := r.QPS > threshold && r.HotKeyShare < p.cfg.HotKeyShare
		switch {
		case reads > p.cfg.AdaptiveReadQPS && !splitWillHelp && len(adaptive) < p.cfg.MaxAdaptiveReplicas:
			if t, ok := p.leastLoaded(r); ok {
				p.add(Operator{Kind: OpAddLearner, Range: r.ID, Target: t, Bytes: r.Bytes, Policy: "adaptive-replicas",
					Reason: fmt.Sprintf("%.0f reads/s above %.0f", r.ReadQPS, p.cfg.AdaptiveReadQPS)})
			}
		case r.ReadQPS < p.cfg.AdaptiveReadQPS/2 && len(adaptive) > 0:
			victim := adaptive[0]
			for _, a := range adaptive[1:] {
				if p.qps[a] > p.qps[victim] {
					victim = a
				}
			}
			p.add(Operator{Kind: OpRemoveReplica, Range: r.ID, Source: victim, Policy: "adaptive-replicas",
				Reason: fmt.Sprintf("cooled to %.0f reads/s", r.ReadQPS)})
		}
	}
}

// leastLoaded is the live node without a replica of r with the lowest load
// score (then QPS, then ID).
func (p *planner) leastLoaded(r *Range) (uint64, bool) {
	var best *Node
	for i := range p.s.Nodes {
		n := &p.s.Nodes[i]
		if !p.acceptsReplicas(n.ID) || has(r, n.ID) {
			continue
		}
		if best == nil || n.Score < best.Score || n.Score == best.Score && (p.qps[n.ID] < p.qps[best.ID] || p.qps[n.ID] == p.qps[best.ID] && n.ID < best.ID) {
			best = n
		}
	}
	if best == nil {
		return 0, false
	}
	return best.ID, true
}
