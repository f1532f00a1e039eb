package placement

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The balance policies: replica counts, lease counts and leaseholder load.
// A move for balance must leave the cluster measurably better by the
// numbers it was decided on, and a range or node that just moved waits for
// fresh numbers (cool-downs), so nothing moves back and forth.

// meanLeases is the mean lease count of live nodes.
func (p *planner) meanLeases() float64 { return p.liveMean(p.leases) }

// meanReplicas is the mean replica count of the nodes that should hold
// replicas (live and not draining).
func (p *planner) meanReplicas() float64 { return p.liveMean(p.replicas) }

// liveMean is the mean of counts over the live nodes.
func (p *planner) liveMean(counts map[uint64]int) float64 {
	n, sum := 0, 0
	for _, node := range p.s.Nodes {
		if node.State == NodeLive {
			n++
			sum += counts[node.ID]
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// tolerance is max(1, frac·mean).
func tolerance(frac, mean float64) float64 { return math.Max(1, frac*mean) }

// Balanced reports whether node's replica count is within tolerance of the
// mean (a phase-2 node is done when it is).
func Balanced(s Snapshot, node uint64, cfg Config) bool {
	p := newPlanner(s, cfg)
	mean := p.meanReplicas()
	return math.Abs(float64(p.replicas[node])-mean) <= tolerance(cfg.BalanceTolerance, mean)
}

// balanceReplicas moves one replica from the fullest live node to the
// emptiest when either is outside the tolerance band around the mean and
// the move narrows the gap (a difference of at least two), so nothing
// moves back and forth.
//
// It waits while replicas sit on dead or draining nodes: repair and drain
// place those on the emptiest nodes anyway, and balancing around them
// first would move data twice.
func (p *planner) balanceReplicas() {
	for _, r := range p.s.Ranges {
		for _, rep := range r.Replicas {
			if st := p.state(rep.Node); st == NodeDead || st == NodeDraining {
				return
			}
		}
	}
	mean := p.meanReplicas()
	tol := tolerance(p.cfg.BalanceTolerance, mean)
	var live []uint64
	for _, n := range p.s.Nodes {
		if n.State == NodeLive {
			live = append(live, n.ID)
		}
	}
	if len(live) < 2 {
		return
	}
	byCount := func() {
		sort.Slice(live, func(i, j int) bool {
			if p.replicas[live[i]] != p.replicas[live[j]] {
				return p.replicas[live[i]] < p.replicas[live[j]]
			}
			return live[i] < live[j]
		})
	}
	for !p.full() {
		byCount()
		hi := live[len(live)-1]
		moved := false
		// The emptiest node that can take one of hi's ranges without
		// crowding a locality.
		for _, lo := range live[:len(live)-1] {
			cl, ch := float64(p.replicas[lo]), float64(p.replicas[hi])
			if ch-cl < 2 || (ch <= mean+tol && cl >= mean-tol) {
				break
			}
			r := p.middleRange(hi, func(r *Range) bool { return !has(r, lo) && p.keepsDiversity(r, hi, lo) && !p.rangeCooling(r.ID) })
			if r == nil {
				continue
			}
			p.add(Operator{Kind: OpMoveReplica, Range: r.ID, Source: hi, Target: lo, Bytes: r.Bytes, Policy: "balance",
				Reason: fmt.Sprintf("node %d has %d replicas, node %d has %d (mean %.1f ± %.1f)", hi, int(ch), lo, int(cl), mean, tol)})
			moved = true
			break
		}
		if !moved {
			return
		}
	}
}

// rangeCooling reports whether range id completed an operator within
// RangeCooldown: its load sample and counts still describe the old layout.
func (p *planner) rangeCooling(id uint64) bool {
	for _, ro := range p.s.Recent {
		if (ro.Op.Range == id || ro.Op.Kind == OpMerge && ro.Op.Other == id) && p.s.Now.Sub(ro.At) < p.cfg.RangeCooldown {
			return true
		}
	}
	return false
}

// nodeCooling reports whether node gave or received a lease or replica
// (with leasesOnly, a lease) within NodeCooldown: its load has not been
// sampled since.
func (p *planner) nodeCooling(node uint64, leasesOnly bool) bool {
	for _, ro := range p.s.Recent {
		if (ro.Op.Source == node || ro.Op.Target == node) && (!leasesOnly || ro.Op.Kind == OpTransferLease) &&
			p.s.Now.Sub(ro.At) < p.cfg.NodeCooldown {
			return true
		}
	}
	return false
}

// liveNodes lists the live nodes by ID.
func (p *planner) liveNodes() []uint64 {
	var live []uint64
	for _, n := range p.s.Nodes {
		if n.State == NodeLive {
			live = append(live, n.ID)
		}
	}
	return live
}

// capacityWeights is each live node's measured capacity (Node.Capacity)
// over the live nodes' mean, where a capacity within deadband of the
// measured nodes' median counts at the median, and a node not measured
// counts at the mean of the measured. The live nodes' weights average 1,
// so weight × the mean lease count (or load) is a node's share: lease
// balance aims each node at it. The median is the reference so that one
// node far off (a co-runner takes its CPU) does not pull its peers out
// of the deadband. Every node weighs exactly 1 when none stands out;
// nodes that are not live weigh 1 (they take no leases).
func capacityWeights(nodes []Node, deadband float64) map[uint64]float64 {
	w := make(map[uint64]float64, len(nodes))
	var measured []float64
	for _, n := range nodes {
		w[n.ID] = 1
		if n.State == NodeLive && n.Capacity > 0 {
			measured = append(measured, n.Capacity)
		}
	}
	if len(measured) == 0 {
		return w
	}
	sort.Float64s(measured)
	k := len(measured)
	median := (measured[(k-1)/2] + measured[k/2]) / 2
	adjusted := func(c float64) (float64, bool) {
		if math.Abs(c/median-1) <= deadband {
			return median, false
		}
		return c, true
	}
	sum, stands := 0.0, false
	for _, c := range measured {
		a, out := adjusted(c)
		sum, stands = sum+a, stands || out
	}
	if !stands {
		return w
	}
	unmeasured := sum / float64(k)
	caps, total, live := map[uint64]float64{}, 0.0, 0
	for _, n := range nodes {
		if n.State != NodeLive {
			continue
		}
		c := unmeasured
		if n.Capacity > 0 {
			c, _ = adjusted(n.Capacity)
		}
		caps[n.ID], total, live = c, total+c, live+1
	}
	for id, c := range caps {
		w[id] = c / (total / float64(live))
	}
	return w
}

// w is node n's capacity weight (1 when not known).
func (p *planner) w(n uint64) float64 {
	if w, ok := p.weight[n]; ok {
		return w
	}
	return 1
}

// weighted reports whether the live nodes' capacities differ, so reasons
// show them.
func (p *planner) weighted(nodes []uint64) bool {
	for _, n := range nodes {
		if p.w(n) != 1 {
			return true
		}
	}
	return false
}

// loadStats summarises node loads: the mean raw load (the level a node of
// mean capacity should carry), and the maximum and standard deviation of
// the loads relative to capacity (load ÷ weight), which are the raw loads
// when capacities are equal or unknown.
type loadStats struct{ max, mean, std float64 }

// statsOf computes loadStats over nodes, with qps moved from src to dst
// when qps > 0 (a projected lease transfer).
func (p *planner) statsOf(nodes []uint64, src, dst uint64, qps float64) loadStats {
	var st loadStats
	rel := make([]float64, len(nodes))
	for i, n := range nodes {
		v := p.projected(n, src, dst, qps)
		st.mean += v / float64(len(nodes))
		rel[i] = v / p.w(n)
		st.max = math.Max(st.max, rel[i])
	}
	for _, v := range rel {
		st.std += (v - st.mean) * (v - st.mean) / float64(len(nodes))
	}
	st.std = math.Sqrt(st.std)
	return st
}

// projected is node n's load with qps moved from src to dst.
func (p *planner) projected(n, src, dst uint64, qps float64) float64 {
	switch n {
	case src:
		return p.load[n] - qps
	case dst:
		return p.load[n] + qps
	}
	return p.load[n]
}

// rel is node n's load relative to its capacity, with qps added.
func (p *planner) rel(n uint64, qps float64) float64 { return (p.load[n] + qps) / p.w(n) }

// loadsString prints the node loads, with a projected transfer applied,
// and each node's capacity weight when capacities differ.
func (p *planner) loadsString(nodes []uint64, src, dst uint64, qps float64) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = fmt.Sprintf("n%d=%.0f", n, p.projected(n, src, dst, qps))
		if p.weighted(nodes) {
			parts[i] += fmt.Sprintf("@%.2f", p.w(n))
		}
	}
	return strings.Join(parts, " ")
}

// balanceLeases brings each node's lease count within tolerance of its
// share (the mean × its capacity weight), never handing a lease to a node
// busier than its share nor raising the busiest node's load relative to
// capacity; then load (balanceLoad). Ranges and nodes that moved lately
// are left alone. The two passes share their limits so neither undoes the
// other. With equal or unknown capacities the shares are the mean.
//
// The tolerance band and the rule that a move closes a gap of two leases
// are the hysteresis: measured capacities wander by a few percent from
// round to round, which moves a share by a fraction of a lease, and a
// lease moved to close a gap leaves no gap for the way back.
func (p *planner) balanceLeases() {
	live := p.liveNodes()
	if len(live) < 2 {
		return
	}
	mean := p.meanLeases()
	before := p.statsOf(live, 0, 0, 0)
	// A receiver is not hot only by numbers that describe it: a node
	// leading a range with a partial (stale) sample, or whose leases
	// changed within NodeCooldown (the observation may still credit it
	// with a lease it gave, or not yet with one it took), can look quieter
	// than it is, and a lease handed to it on that number goes back once
	// fresh samples are in: the lease moves A→B→A. Replica moves do not
	// change where load is attributed, so only lease moves count here.
	notHot := func(n uint64) bool {
		return before.mean == 0 || !p.loadStale[n] && !p.nodeCooling(n, true) && p.rel(n, 0) <= before.mean
	}
	// Count: over-band nodes shed, under-band nodes receive from the node
	// furthest above its share that leads a range they have a voter of.
	excess := func(n uint64) float64 { return float64(p.leases[n]) - mean*p.w(n) }
	sort.Slice(live, func(i, j int) bool {
		if excess(live[i]) != excess(live[j]) {
			return excess(live[i]) > excess(live[j])
		}
		return live[i] < live[j]
	})
	for _, dst := range live {
		for _, src := range live {
			if p.leasesFull() {
				return
			}
			if p.countMove(live, src, dst, mean, before, notHot) {
				break
			}
		}
	}
	p.balanceLoad(live)
}

// countMove plans one lease from src to dst (or, with src over its band,
// to any voter at most at its share) when src or dst is outside its lease
// band (tolerance around its share) and src is two or more leases further
// above its share than dst, the receiver is not busier than its share nor,
// after the move, busier for its capacity than src was, and the busiest
// node's load relative to capacity does not rise. Under load, a range with
// a partial sample stays: its rate would understate what the receiver
// takes on. It reports whether it planned one.
func (p *planner) countMove(live []uint64, src, dst uint64, mean float64, before loadStats, notHot func(uint64) bool) bool {
	share := func(n uint64) float64 { return mean * p.w(n) }
	tolSrc, tolDst := tolerance(p.cfg.LeaseTolerance, share(src)), tolerance(p.cfg.LeaseTolerance, share(dst))
	over, under := float64(p.leases[src]) > share(src)+tolSrc, float64(p.leases[dst]) < share(dst)-tolDst
	if src == dst || !(over || under) || float64(p.leases[src])-share(src)-(float64(p.leases[dst])-share(dst)) < 2 {
		return false
	}
	accept := func(n uint64) bool { return float64(p.leases[n])+1 <= share(n) && notHot(n) }
	if under {
		accept = func(n uint64) bool { return n == dst && notHot(n) }
	}
	// The receiver must not end up busier than the giver was: a count move
	// never undoes a load move.
	// Nor does it give a lease back to a node it left lately (for the
	// writers, for load, or for counts): Lease.ReturnAfter.
	ok := func(r *Range) func(uint64) bool {
		return func(n uint64) bool {
			return accept(n) && !p.leftLately(r.ID, n) && p.rel(n, r.QPS) <= p.rel(src, 0) && p.statsOf(live, src, n, r.QPS).max <= math.Max(before.max, p.rel(src, 0))
		}
	}
	r := p.middleRange(src, func(r *Range) bool {
		return r.Leaseholder == src && !p.rangeCooling(r.ID) && !(r.LoadStale && before.mean > 0) && !(r.ControlLoop && p.bootstrapping()) && p.bestLeaseTarget(r, ok(r)) != 0
	})
	if r == nil {
		return false
	}
	t := p.bestLeaseTarget(r, ok(r))
	reason := fmt.Sprintf("node %d holds %d leases, node %d %d (mean %.1f ± %.1f)", src, p.leases[src], t, p.leases[t], mean, tolerance(p.cfg.LeaseTolerance, mean))
	if p.weighted(live) {
		reason = fmt.Sprintf("node %d holds %d leases for a share of %.1f ± %.1f, node %d %d for %.1f (shares by measured capacity, mean %.1f)",
			src, p.leases[src], share(src), tolSrc, t, p.leases[t], share(t), mean)
	}
	return p.add(Operator{Kind: OpTransferLease, Range: r.ID, Source: src, Target: t, Policy: "lease-balance", Reason: reason})
}

// bootstrapping reports whether a live node is in a bootstrap phase.
func (p *planner) bootstrapping() bool {
	for _, n := range p.s.Nodes {
		if n.State == NodeLive && n.Phase != PhaseNone {
			return true
		}
	}
	return false
}

// balanceLoad moves one lease off the busiest node for its capacity (load
// ÷ capacity weight; plain load when capacities are equal or unknown)
// when, by the projected node loads (the moved range's sampled rate taken
// off its leaseholder and put on the target), the busier of the two nodes
// afterwards, for its capacity, is below the busiest node's now by more
// than the margin: the maximum cannot
// rise, the spread of node loads drops, and a move that only swaps which
// node is busiest (two hot ranges on three nodes) or whose benefit a
// sample's noise can explain is not made. Of such moves, the one leaving
// the two nodes' higher load lowest. Node loads are the rates of the
// ranges each node leads, so a number is only ever attributed to the lease
// that produced it; a node leading a range with a stale sample, or that
// moved something lately, takes no part. Lease counts do not bound it: load
// matters more than counts, and the count pass hands nothing to a node
// busier than average nor raises the busiest node's load, so it does not
// undo this.
//
// A lease does not go back to a node it left within Lease.ReturnAfter.
// Nodes sample on their own clocks, so for a window after the workload
// changes some report the old rate and some the new, and the mean is
// neither: a node can look overloaded (at the band's edge, with the rest
// of the cluster still reporting the old rate) on numbers that are not
// there once every sample is whole. The move made then is small (the
// margin holds), but its reversal, a range cool-down later on whole
// numbers, is the same move again: the return rule stops that, and a real
// imbalance still has every other range and target.
func (p *planner) balanceLoad(live []uint64) {
	before := p.statsOf(live, 0, 0, 0)
	if p.leasesFull() || before.mean == 0 {
		return
	}
	src := live[0]
	for _, n := range live {
		if p.rel(n, 0) > p.rel(src, 0) {
			src = n
		}
	}
	if p.rel(src, 0) < overloaded*before.mean || p.loadStale[src] || p.nodeCooling(src, false) {
		return
	}
	need := math.Max(p.cfg.MoveMargin*before.mean, p.cfg.MinMoveQPS)
	var best *Range
	var bestTarget uint64
	bestPeak := p.rel(src, 0) - need
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.taken[r.ID] || r.Leaseholder != src || r.LoadStale || r.QPS < p.cfg.MinMoveQPS || p.rangeCooling(r.ID) {
			continue
		}
		for _, t := range voters(r) {
			if n := p.nodes[t]; t == src || n == nil || n.State != NodeLive || n.ClockUntrusted || p.writersHere(r, t) || p.loadStale[t] || p.nodeCooling(t, false) ||
				p.leftLately(r.ID, t) {
				continue
			}
			// Ties go to the quieter target, then the first range.
			peak := math.Max(p.rel(src, -r.QPS), p.rel(t, r.QPS))
			if peak < bestPeak || best != nil && peak == bestPeak && p.rel(t, 0) < p.rel(bestTarget, 0) {
				best, bestTarget, bestPeak = r, t, peak
			}
		}
	}
	if best == nil {
		return
	}
	after := p.statsOf(live, src, bestTarget, best.QPS)
	p.add(Operator{Kind: OpTransferLease, Range: best.ID, Source: src, Target: bestTarget, Policy: "lease-balance",
		Reason: fmt.Sprintf("range %d's %.0f qps from node %d to node %d: node loads %s → %s (max %.0f → %.0f, stddev %.0f → %.0f, margin %.0f)",
			best.ID, best.QPS, src, bestTarget, p.loadsString(live, 0, 0, 0), p.loadsString(live, src, bestTarget, best.QPS),
			before.max, after.max, before.std, after.std, need)})
}

// overloaded is the load band's upper edge, as a multiple of the mean node
// load (for the node's capacity): above it a node sheds a lease for load.
const overloaded = 1.25

// bestLeaseTarget is the live voter of r (not the leaseholder) whose clock
// is trusted, passing ok, with the lowest load score, or 0. While r's
// writes come from its leaseholder's locality, only voters there count
// (writersHere).
func (p *planner) bestLeaseTarget(r *Range, ok func(uint64) bool) uint64 {
	var best *Node
	for _, v := range voters(r) {
		n := p.nodes[v]
		if n == nil || v == r.Leaseholder || n.State != NodeLive || n.ClockUntrusted || p.writersHere(r, v) || !ok(v) {
			continue
		}
		if best == nil || n.Score < best.Score || n.Score == best.Score && n.ID < best.ID {
			best = n
		}
	}
	if best == nil {
		return 0
	}
	return best.ID
}
