package placement

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"github.com/tidekv/tidekv/internal/units"
)

// Plan is what one decision returns: operators for the runner and notes
// (observations that call for no operator, such as a single hot key that no
// split can spread) for the event log.
type Plan struct {
	Ops   []Operator
	Notes []string
}

// Decide runs every policy over the snapshot, most urgent first: repair,
// up- and down-replication, decommission, then (with Rebalance) splits,
// adaptive read replicas, bootstrap of new nodes, replica balance, lease
// balance and (with Merges) merges. Each
// range gets at most one operator per decision, and later policies see the
// effect of earlier ones' operators on replica and lease counts.
func Decide(s Snapshot, cfg Config) Plan {
	p := newPlanner(s, cfg)
	p.resumeMerges()
	p.repair()
	p.replicationFactor()
	p.drain()
	if !cfg.Rebalance {
		return p.plan
	}
	p.splits()
	p.adaptive()
	p.bootstrap()
	p.balanceReplicas()
	p.balanceLeases()
	if cfg.Merges {
		p.merges()
	}
	return p.plan
}

// planner holds one decision's working state.
type planner struct {
	s     Snapshot
	cfg   Config
	nodes map[uint64]*Node
	// replicas and leases per node, updated as operators are planned.
	replicas map[uint64]int
	leases   map[uint64]int
	qps      map[uint64]float64
	// taken: ranges that already have an operator (in flight or planned).
	taken  map[uint64]bool
	ranges map[uint64]*Range
	plan   Plan
}

func newPlanner(s Snapshot, cfg Config) *planner {
	p := &planner{s: s, cfg: cfg, nodes: map[uint64]*Node{}, replicas: map[uint64]int{},
		leases: map[uint64]int{}, qps: map[uint64]float64{}, taken: map[uint64]bool{}, ranges: map[uint64]*Range{}}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		p.nodes[n.ID] = n
		p.replicas[n.ID] = 0
		p.qps[n.ID] = n.QPS
	}
	for i := range s.Ranges {
		r := &s.Ranges[i]
		p.ranges[r.ID] = r
		for _, rep := range r.Replicas {
			// Adaptive learners come and go with read load; counting them
			// would push voters off their nodes and back again.
			if !rep.Adaptive {
				p.replicas[rep.Node]++
			}
		}
		if r.Leaseholder != 0 {
			p.leases[r.Leaseholder]++
		}
		if s.Busy[r.ID] {
			p.taken[r.ID] = true
		}
	}
	for _, op := range s.InFlight {
		p.count(op)
		p.taken[op.Range] = true
		if op.Kind == OpMerge {
			p.taken[op.Other] = true
		}
	}
	return p
}

// full reports whether the decision holds MaxOps operators of the kind:
// lease transfers have a budget of their own, so a backlog of replica
// changes (which the runner throttles anyway) never starves lease balance.
func (p *planner) full() bool { return p.opsOfKind(false) >= p.cfg.MaxOps }

func (p *planner) leasesFull() bool { return p.opsOfKind(true) >= p.cfg.MaxOps }

func (p *planner) opsOfKind(leases bool) int {
	n := 0
	for _, op := range p.plan.Ops {
		if (op.Kind == OpTransferLease) == leases {
			n++
		}
	}
	return n
}

// add plans op unless its range already has one; it updates the counts the
// later policies see.
func (p *planner) add(op Operator) bool {
	budget := p.full()
	if op.Kind == OpTransferLease {
		budget = p.leasesFull()
	}
	if budget || p.taken[op.Range] || op.Kind == OpMerge && p.taken[op.Other] {
		return false
	}
	p.taken[op.Range] = true
	if op.Kind == OpMerge {
		p.taken[op.Other] = true
	}
	p.count(op)
	p.plan.Ops = append(p.plan.Ops, op)
	return true
}

// count applies op's effect to the replica and lease counts.
func (p *planner) count(op Operator) {
	r := p.ranges[op.Range]
	switch op.Kind {
	case OpAddVoter:
		if r == nil || !has(r, op.Target) { // promoting a learner adds no replica
			p.replicas[op.Target]++
		}
	case OpRemoveReplica:
		if r == nil || !isAdaptive(r, op.Source) {
			p.replicas[op.Source]--
		}
	case OpMoveReplica:
		p.replicas[op.Target]++
		p.replicas[op.Source]--
	case OpTransferLease:
		p.leases[op.Target]++
		p.leases[op.Source]--
	}
}

func isAdaptive(r *Range, node uint64) bool {
	for _, rep := range r.Replicas {
		if rep.Node == node {
			return rep.Adaptive
		}
	}
	return false
}

func (p *planner) note(format string, args ...any) {
	p.plan.Notes = append(p.plan.Notes, fmt.Sprintf(format, args...))
}

func (p *planner) state(node uint64) NodeState {
	if n := p.nodes[node]; n != nil {
		return n.State
	}
	return NodeDead // a node placement has never heard of is as good as dead
}

// acceptsReplicas reports whether node may receive a new replica.
func (p *planner) acceptsReplicas(node uint64) bool { return p.state(node) == NodeLive }

func has(r *Range, node uint64) bool {
	for _, rep := range r.Replicas {
		if rep.Node == node {
			return true
		}
	}
	return false
}

func voters(r *Range) []uint64 {
	var out []uint64
	for _, rep := range r.Replicas {
		if rep.Type == Voter {
			out = append(out, rep.Node)
		}
	}
	return out
}

// usedLocalities lists the localities of r's voters other than the one
// on node replacing (0: none replaced).
func (p *planner) usedLocalities(r *Range, replacing uint64) map[string]bool {
	used := map[string]bool{}
	for _, rep := range r.Replicas {
		if n := p.nodes[rep.Node]; n != nil && n.Locality != "" && rep.Type == Voter && rep.Node != replacing {
			used[n.Locality] = true
		}
	}
	return used
}

// keepsDiversity reports whether moving r's replica from src to dst keeps
// its voters as spread over localities as before.
func (p *planner) keepsDiversity(r *Range, src, dst uint64) bool {
	s, d := p.nodes[src], p.nodes[dst]
	if s == nil || d == nil || d.Locality == "" || s.Locality == d.Locality {
		return true
	}
	return !p.usedLocalities(r, src)[d.Locality]
}

// target picks where a new replica of r goes (replacing the one on node
// replacing, or 0): a live node without one, preferring a locality r's
// other voters do not use yet, then the fewest replicas, then the lowest
// load score. ok is false when no node qualifies.
func (p *planner) target(r *Range, replacing uint64) (uint64, bool) {
	used := p.usedLocalities(r, replacing)
	var best *Node
	better := func(a, b *Node) bool {
		if da, db := used[a.Locality] && a.Locality != "", used[b.Locality] && b.Locality != ""; da != db {
			return !da
		}
		if p.replicas[a.ID] != p.replicas[b.ID] {
			return p.replicas[a.ID] < p.replicas[b.ID]
		}
		if a.Score != b.Score {
			return a.Score < b.Score
		}
		return a.ID < b.ID
	}
	for i := range p.s.Nodes {
		n := &p.s.Nodes[i]
		if !p.acceptsReplicas(n.ID) || has(r, n.ID) {
			continue
		}
		if best == nil || better(n, best) {
			best = n
		}
	}
	if best == nil {
		return 0, false
	}
	return best.ID, true
}

// resumeMerges runs again every merge left half done (a range frozen into
// its neighbour): it completes, or is refused and unfreezes the range.
// Frozen ranges are otherwise left alone.
func (p *planner) resumeMerges() {
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if r.MergingInto == 0 {
			continue
		}
		if _, ok := p.ranges[r.MergingInto]; ok && !p.taken[r.ID] && !p.taken[r.MergingInto] {
			p.add(Operator{Kind: OpMerge, Range: r.MergingInto, Other: r.ID, Policy: "merge",
				Reason: fmt.Sprintf("range %d is frozen for a merge into range %d: finishing it", r.ID, r.MergingInto)})
		}
		p.taken[r.ID] = true
	}
}

// repair replaces replicas on dead nodes, the ranges with the fewest live
// voters first (they are closest to losing quorum).
func (p *planner) repair() {
	type damaged struct {
		r    *Range
		live int
	}
	var ds []damaged
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		dead, live := false, 0
		for _, rep := range r.Replicas {
			switch {
			case p.state(rep.Node) == NodeDead:
				dead = true
			case rep.Type == Voter:
				live++
			}
		}
		if dead {
			ds = append(ds, damaged{r, live})
		}
	}
	sort.SliceStable(ds, func(i, j int) bool {
		if ds[i].live != ds[j].live {
			return ds[i].live < ds[j].live
		}
		return ds[i].r.ID < ds[j].r.ID
	})
	for _, d := range ds {
		r := d.r
		if p.taken[r.ID] {
			continue
		}
		if vs := voters(r); d.live <= len(vs)/2 {
			p.note("range %d: only %d of %d voters live, no quorum to repair with", r.ID, d.live, len(vs))
			continue
		}
		for _, rep := range r.Replicas {
			if p.state(rep.Node) != NodeDead {
				continue
			}
			if rep.Type == Learner {
				p.add(Operator{Kind: OpRemoveReplica, Range: r.ID, Source: rep.Node, Policy: "repair",
					Reason: fmt.Sprintf("learner on dead node %d", rep.Node)})
				break
			}
			t, ok := p.target(r, rep.Node)
			if !ok {
				p.note("range %d: no live node to replace its replica on dead node %d", r.ID, rep.Node)
				break
			}
			p.add(Operator{Kind: OpMoveReplica, Range: r.ID, Source: rep.Node, Target: t, Bytes: r.Bytes, Policy: "repair",
				Reason: fmt.Sprintf("node %d is dead; %d live voters left", rep.Node, d.live)})
			break
		}
	}
}

// replicationFactor adds voters to ranges below the replication factor
// (finishing an interrupted addition when a plain learner is left over)
// and removes surplus voters.
func (p *planner) replicationFactor() {
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.taken[r.ID] {
			continue
		}
		vs := voters(r)
		switch {
		case len(vs) < p.cfg.ReplicationFactor:
			reason := fmt.Sprintf("%d of %d voters", len(vs), p.cfg.ReplicationFactor)
			for _, rep := range r.Replicas {
				if rep.Type == Learner && !rep.Adaptive && p.acceptsReplicas(rep.Node) {
					p.add(Operator{Kind: OpAddVoter, Range: r.ID, Target: rep.Node, Bytes: r.Bytes, Policy: "replication",
						Reason: reason + "; finishing the interrupted addition on node " + fmt.Sprint(rep.Node)})
					break
				}
			}
			if p.taken[r.ID] {
				continue
			}
			if t, ok := p.target(r, 0); ok {
				p.add(Operator{Kind: OpAddVoter, Range: r.ID, Target: t, Bytes: r.Bytes, Policy: "replication", Reason: reason})
			}
		case p.leftoverLearner(r) != 0:
			n := p.leftoverLearner(r)
			p.add(Operator{Kind: OpRemoveReplica, Range: r.ID, Source: n, Policy: "replication",
				Reason: fmt.Sprintf("learner on node %d left over by an interrupted replica change (%d voters already)", n, len(vs))})
		case len(vs) > p.cfg.ReplicationFactor:
			// Drop a voter on a draining node if there is one, else on the
			// node with the most replicas; never the leaseholder's (that
			// would cost a lease transfer first).
			var victim uint64
			worse := func(a, b uint64) bool {
				if da, db := p.state(a) == NodeDraining, p.state(b) == NodeDraining; da != db {
					return da
				}
				return p.replicas[a] > p.replicas[b]
			}
			for _, v := range vs {
				if v != r.Leaseholder && (victim == 0 || worse(v, victim)) {
					victim = v
				}
			}
			if victim != 0 {
				p.add(Operator{Kind: OpRemoveReplica, Range: r.ID, Source: victim, Policy: "replication",
					Reason: fmt.Sprintf("%d voters, replication factor %d", len(vs), p.cfg.ReplicationFactor)})
			}
		}
	}
}

// leftoverLearner returns the node of a plain learner that has sat on r,
// which has all its voters, for longer than LearnerGrace (0 if none): the
// change that added it was interrupted.
func (p *planner) leftoverLearner(r *Range) uint64 {
	if len(voters(r)) < p.cfg.ReplicationFactor {
		return 0 // it is finished (promoted) instead
	}
	for _, rep := range r.Replicas {
		if rep.Type == Learner && !rep.Adaptive && !rep.Since.IsZero() && p.s.Now.Sub(rep.Since) >= p.cfg.LearnerGrace {
			return rep.Node
		}
	}
	return 0
}

// drain moves replicas off decommissioning nodes one range at a time per
// node, to the least-loaded eligible node.
func (p *planner) drain() {
	for i := range p.s.Nodes {
		n := &p.s.Nodes[i]
		if n.State != NodeDraining {
			continue
		}
		var ranges []*Range
		inFlight := false
		for j := range p.s.Ranges {
			r := &p.s.Ranges[j]
			if !has(r, n.ID) {
				continue
			}
			if p.taken[r.ID] {
				inFlight = true
				break
			}
			ranges = append(ranges, r)
		}
		if inFlight {
			continue // one at a time
		}
		// The first range that can move; one that cannot is reported and
		// does not hold up the others.
		for _, r := range ranges {
			if p.drainOne(n, r) {
				break
			}
		}
	}
}

// drainOne plans moving node n's replica of r away; false if it cannot.
func (p *planner) drainOne(n *Node, r *Range) bool {
	for _, rep := range r.Replicas {
		if rep.Node != n.ID {
			continue
		}
		if rep.Type == Learner {
			return p.add(Operator{Kind: OpRemoveReplica, Range: r.ID, Source: n.ID, Policy: "decommission",
				Reason: fmt.Sprintf("node %d is draining", n.ID)})
		}
		t, ok := p.target(r, n.ID)
		if !ok {
			p.note("node %d cannot drain: no eligible node for range %d", n.ID, r.ID)
			return false
		}
		return p.add(Operator{Kind: OpMoveReplica, Range: r.ID, Source: n.ID, Target: t, Bytes: r.Bytes, Policy: "decommission",
			Reason: fmt.Sprintf("node %d is draining", n.ID)})
	}
	return false
}

// splits keeps ranges bounded: by size (Θmax) and by load. Load must be
// sustained: both the last rate and the smoothed one are above the
// threshold, so a burst of a second or two splits nothing.
func (p *planner) splits() {
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
		case qps > p.cfg.SplitQPS && r.HotKeyShare >= p.cfg.HotKeyShare:
			p.note("range %d: %.0f qps, %.0f%% on one key: no split spreads it (adaptive replicas may)", r.ID, qps, 100*r.HotKeyShare)
		case qps > p.cfg.SplitQPS:
			p.add(Operator{Kind: OpSplit, Range: r.ID, SplitByLoad: true, Policy: "load-split",
				Reason: fmt.Sprintf("%.0f qps sustained above the %.0f threshold", qps, p.cfg.SplitQPS)})
		}
	}
}

// adaptive adds learner replicas to ranges with heavy, sustained read load
// that a load split will not spread (one hot key, or a rate below the split
// threshold), on the least-loaded nodes, and removes them when the range
// has cooled to half the threshold (the gap keeps them from flapping).
func (p *planner) adaptive() {
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
		splitWillHelp := r.QPS > p.cfg.SplitQPS && r.HotKeyShare < p.cfg.HotKeyShare
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

// heavy lists the nodes that count as heavily loaded, or, when none does,
// the nodes above the mean replica count (a new node must take something
// to serve at once).
func (p *planner) heavy() []uint64 {
	var live []*Node
	var sum float64
	for i := range p.s.Nodes {
		if n := &p.s.Nodes[i]; n.State == NodeLive && n.Phase == PhaseNone {
			live = append(live, n)
			sum += n.QPS
		}
	}
	if len(live) == 0 {
		return nil
	}
	mean := sum / float64(len(live))
	var out []uint64
	for _, n := range live {
		if n.CPU > p.cfg.HeavyCPU && n.QPS > p.cfg.HeavyFactor*mean {
			out = append(out, n.ID)
		}
	}
	if len(out) > 0 {
		return out
	}
	meanReplicas := p.meanReplicas()
	for _, n := range live {
		if float64(p.replicas[n.ID]) > meanReplicas {
			out = append(out, n.ID)
		}
	}
	return out
}

// BootstrapQuota is how many replicas a node in phase 1 takes before phase
// 2: BootstrapShare of the donors' replicas, at least one.
func BootstrapQuota(s Snapshot, cfg Config) int {
	p := newPlanner(s, cfg)
	total := 0
	for _, d := range p.heavy() {
		total += p.replicas[d]
	}
	return max(1, int(math.Ceil(cfg.BootstrapShare*float64(total))))
}

// bootstrap gives nodes in phase 1 their quota of replicas from the donors,
// each taken from the middle of the donor's ranges ordered by hits (neither
// its hottest nor its coldest, so the new node neither gets swamped nor
// idles), and moves the leases of what it received from heavy donors.
func (p *planner) bootstrap() {
	quota := -1
	for i := range p.s.Nodes {
		n := &p.s.Nodes[i]
		if n.Phase != PhaseOne || n.State != NodeLive {
			continue
		}
		if quota < 0 {
			quota = BootstrapQuota(p.s, p.cfg)
		}
		donors := p.heavy()
		for _, d := range donors {
			if p.replicas[n.ID] >= quota || p.full() {
				break
			}
			if r := p.middleRange(d, func(r *Range) bool { return !has(r, n.ID) && p.keepsDiversity(r, d, n.ID) }); r != nil {
				p.add(Operator{Kind: OpMoveReplica, Range: r.ID, Source: d, Target: n.ID, Bytes: r.Bytes, Policy: "bootstrap",
					Reason: fmt.Sprintf("node %d phase 1: takes %d replicas from loaded nodes", n.ID, quota)})
			}
		}
		// Leases only up to the mean (rounded up), or lease balance hands
		// them back.
		meanLeases := math.Ceil(p.meanLeases())
		for _, d := range donors {
			if float64(p.leases[n.ID]+1) > meanLeases {
				break
			}
			r := p.middleRange(d, func(r *Range) bool { return r.Leaseholder == d && hasVoter(r, n.ID) })
			if r != nil {
				p.add(Operator{Kind: OpTransferLease, Range: r.ID, Source: d, Target: n.ID, Policy: "bootstrap",
					Reason: fmt.Sprintf("node %d phase 1: takes leases from loaded node %d", n.ID, d)})
			}
		}
	}
}

func hasVoter(r *Range, node uint64) bool {
	for _, rep := range r.Replicas {
		if rep.Node == node && rep.Type == Voter {
			return true
		}
	}
	return false
}

// middleRange returns, among node's ranges that are free and pass ok, the
// one in the middle when ordered by HitsEWMA.
func (p *planner) middleRange(node uint64, ok func(*Range) bool) *Range {
	var rs []*Range
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if !p.taken[r.ID] && hasVoter(r, node) && ok(r) {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].HitsEWMA != rs[j].HitsEWMA {
			return rs[i].HitsEWMA < rs[j].HitsEWMA
		}
		return rs[i].ID < rs[j].ID
	})
	return rs[len(rs)/2]
}

// meanLeases is the mean lease count of live nodes.
func (p *planner) meanLeases() float64 {
	n, sum := 0, 0
	for _, node := range p.s.Nodes {
		if node.State == NodeLive {
			n++
			sum += p.leases[node.ID]
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// meanReplicas is the mean replica count of the nodes that should hold
// replicas (live and not draining).
func (p *planner) meanReplicas() float64 {
	n, sum := 0, 0
	for _, node := range p.s.Nodes {
		if node.State == NodeLive {
			n++
			sum += p.replicas[node.ID]
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
			r := p.middleRange(hi, func(r *Range) bool { return !has(r, lo) && p.keepsDiversity(r, hi, lo) })
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

// balanceLeases evens out lease counts within tolerance, never handing a
// lease to a node busier than average; then load: the busiest node hands a
// lease to a voter on a quieter node when that lowers the higher of the
// two nodes' request rates and keeps the receiver within the lease band.
// The two passes share these limits so neither undoes the other.
func (p *planner) balanceLeases() {
	var live []uint64
	qsum := 0.0
	for _, n := range p.s.Nodes {
		if n.State == NodeLive {
			live = append(live, n.ID)
			qsum += p.qps[n.ID]
		}
	}
	if len(live) < 2 {
		return
	}
	mean := p.meanLeases()
	tol := tolerance(p.cfg.LeaseTolerance, mean)
	qmean := qsum / float64(len(live))
	notHot := func(n uint64) bool { return qmean == 0 || p.qps[n] <= qmean }
	// Count: over-band nodes shed, under-band nodes receive from the node
	// with the most leases.
	sort.Slice(live, func(i, j int) bool {
		if p.leases[live[i]] != p.leases[live[j]] {
			return p.leases[live[i]] > p.leases[live[j]]
		}
		return live[i] < live[j]
	})
	for _, dst := range live {
		if p.leasesFull() {
			return
		}
		src := live[0]
		over, under := float64(p.leases[src]) > mean+tol, float64(p.leases[dst]) < mean-tol
		if !(over || under) || p.leases[src]-p.leases[dst] < 2 {
			continue
		}
		accept := func(n uint64) bool { return float64(p.leases[n])+1 <= mean && notHot(n) }
		if under {
			accept = func(n uint64) bool { return n == dst && notHot(n) }
		}
		r := p.middleRange(src, func(r *Range) bool { return r.Leaseholder == src && p.bestLeaseTarget(r, accept) != 0 })
		if r == nil {
			continue
		}
		t := p.bestLeaseTarget(r, accept)
		p.add(Operator{Kind: OpTransferLease, Range: r.ID, Source: src, Target: t, Policy: "lease-balance",
			Reason: fmt.Sprintf("node %d holds %d leases, node %d %d (mean %.1f ± %.1f)", src, p.leases[src], t, p.leases[t], mean, tol)})
	}
	// Load: one lease from the busiest node, if it helps.
	sort.Slice(live, func(i, j int) bool { return p.qps[live[i]] > p.qps[live[j]] })
	src := live[0]
	if p.leasesFull() || qmean == 0 || p.qps[src] < 1.25*qmean {
		return
	}
	var best *Range
	var bestTarget uint64
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.taken[r.ID] || r.Leaseholder != src || r.QPS == 0 {
			continue
		}
		t := p.bestLeaseTarget(r, func(n uint64) bool {
			return p.qps[n]+r.QPS < p.qps[src] && float64(p.leases[n])+1 <= mean+tol
		})
		if t == 0 {
			continue
		}
		// The largest move that still strictly lowers the maximum.
		if best == nil || r.QPS > best.QPS {
			best, bestTarget = r, t
		}
	}
	if best != nil {
		p.add(Operator{Kind: OpTransferLease, Range: best.ID, Source: src, Target: bestTarget, Policy: "lease-balance",
			Reason: fmt.Sprintf("node %d serves %.0f qps (mean %.0f); range %d's %.0f qps move to node %d", src, p.qps[src], qmean, best.ID, best.QPS, bestTarget)})
		p.qps[src] -= best.QPS
		p.qps[bestTarget] += best.QPS
	}
}

// bestLeaseTarget is the live voter of r (not the leaseholder) passing ok
// with the lowest load score, or 0.
func (p *planner) bestLeaseTarget(r *Range, ok func(uint64) bool) uint64 {
	var best *Node
	for _, v := range voters(r) {
		n := p.nodes[v]
		if n == nil || v == r.Leaseholder || n.State != NodeLive || !ok(v) {
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

// merges joins adjacent ranges that are together below Θmin and below half
// the load-split threshold, live on the same voters with no learners, and
// did not split recently.
func (p *planner) merges() {
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
		// it splits again as soon as it is merged.
		if l.QPS+r.QPS >= p.cfg.SplitQPS/2 {
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
