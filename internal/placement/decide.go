package placement

import (
	"fmt"
	"math"
	"sort"
)

// Plan is what one decision returns: operators for the runner and notes
// (observations that call for no operator, such as a single hot key that no
// split can spread) for the event log.
type Plan struct {
	Ops   []Operator
	Notes []string
}

// Decide runs every policy over the snapshot, most urgent first: repair,
// up- and down-replication, decommission, leases off nodes with untrusted
// clocks, then (with Rebalance) splits, adaptive read replicas, bootstrap
// of new nodes, replica balance, leases toward their writers, lease
// balance and (with Merges) merges. Each
// range gets at most one operator per decision (or adaptive learners
// together, see Together), and later policies see the
// effect of earlier ones' operators on replica and lease counts.
func Decide(s Snapshot, cfg Config) Plan {
	p := newPlanner(s, cfg)
	p.resumeMerges()
	p.repair()
	p.keySpaceSplits()
	p.replicationFactor()
	p.drain()
	p.shedUntrustedClocks()
	if !cfg.Rebalance {
		return p.plan
	}
	p.splits()
	p.adaptive()
	p.bootstrap()
	p.balanceReplicas()
	p.followWriters()
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
	// load is each node's request rate attributed from the ranges it
	// leads (updated as lease transfers are planned); loadStale marks the
	// nodes leading a range whose sample is stale, so their total is not
	// known yet.
	load      map[uint64]float64
	loadStale map[uint64]bool
	// weight is each live node's capacity over the live nodes' mean
	// (capacityWeights): lease balance aims node n at weight[n] × the mean
	// lease count and load.
	weight map[uint64]float64
	// taken: ranges that already have an operator (in flight or planned).
	taken  map[uint64]bool
	ranges map[uint64]*Range
	plan   Plan
}

func newPlanner(s Snapshot, cfg Config) *planner {
	p := &planner{s: s, cfg: cfg, nodes: map[uint64]*Node{}, replicas: map[uint64]int{},
		leases: map[uint64]int{}, qps: map[uint64]float64{}, load: map[uint64]float64{}, loadStale: map[uint64]bool{}, taken: map[uint64]bool{}, ranges: map[uint64]*Range{}}
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
			p.load[r.Leaseholder] += r.QPS
			p.loadStale[r.Leaseholder] = p.loadStale[r.Leaseholder] || r.LoadStale
		}
		if s.Busy[r.ID] {
			p.taken[r.ID] = true
		}
	}
	p.weight = capacityWeights(s.Nodes, cfg.CapacityDeadband)
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

// addTogether plans ops, operators that run on one range together
// (Together), as far as the budget allows, unless the range already has
// an operator.
func (p *planner) addTogether(ops []Operator) {
	if len(ops) == 0 || !p.add(ops[0]) {
		return
	}
	for _, op := range ops[1:] {
		if p.full() {
			return
		}
		p.count(op)
		p.plan.Ops = append(p.plan.Ops, op)
	}
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
		if r != nil {
			p.load[op.Target] += r.QPS
			p.load[op.Source] -= r.QPS
		}
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
// and removes surplus voters once they have settled.
func (p *planner) replicationFactor() {
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.taken[r.ID] {
			continue
		}
		vs, rf := voters(r), p.rf(r)
		switch {
		case len(vs) < rf:
			reason := fmt.Sprintf("%d of %d voters", len(vs), rf)
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
		case len(vs) > rf && p.surplusSettled(r):
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
					Reason: fmt.Sprintf("%d voters, replication factor %d", len(vs), rf)})
			}
		}
	}
}

// surplusSettled reports whether r's newest voter has been seen for
// SurplusGrace (an unknown sighting counts as old).
func (p *planner) surplusSettled(r *Range) bool {
	for _, rep := range r.Replicas {
		if rep.Type == Voter && !rep.Since.IsZero() && p.s.Now.Sub(rep.Since) < p.cfg.SurplusGrace {
			return false
		}
	}
	return true
}

// leftoverLearner returns the node of a plain learner that has sat on r,
// which has all its voters, for longer than LearnerGrace (0 if none): the
// change that added it was interrupted.
func (p *planner) leftoverLearner(r *Range) uint64 {
	if len(voters(r)) < p.rf(r) {
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
		// them back; none to a node whose clock is not trusted.
		meanLeases := math.Ceil(p.meanLeases())
		for _, d := range donors {
			if n.ClockUntrusted {
				break
			}
			if float64(p.leases[n.ID]+1) > meanLeases {
				break
			}
			// Not the control loop's range: its lease moving would
			// restart the bootstrap this is part of.
			r := p.middleRange(d, func(r *Range) bool { return r.Leaseholder == d && hasVoter(r, n.ID) && !r.ControlLoop })
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
