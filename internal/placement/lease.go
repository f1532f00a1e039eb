package placement

import (
	"fmt"
	"sort"
	"time"
)

// Lease placement by write origin: a range's lease belongs near the writers,
// since every write travels to the leaseholder. The leaseholder counts its
// writes by the locality they came from and reports the rates with the
// range's load; when one other locality clearly dominates for a whole
// sampling window, the lease moves to a voter there.

// LeaseConfig tunes FollowTheWriters.
type LeaseConfig struct {
	// MinWriteQPS is the fewest writes per second over a sampling window
	// for a decision: below it the sample says too little to move anything.
	MinWriteQPS float64
	// Dominance is the share of the window's writes (0..1] a locality needs
	// for the lease to move there.
	Dominance float64
	// Hysteresis is how many times more writes the winning locality must
	// have than the current leaseholder's (≥ 1), so two localities writing
	// about equally do not pass the lease back and forth.
	Hysteresis float64
	// ReturnAfter: a lease that left a node, for whatever reason (a
	// healed clock too: the node takes other leases), is not moved back
	// there by a balance policy (following the writers, lease
	// counts, leaseholder load) for this long, counted inclusively (≥ 0;
	// the control loop's memory of finished operators,
	// control.RunnerConfig.RecentWindow, must cover it). Two policies may
	// disagree about a range (the writers pull its lease one way, counts
	// the other), and one policy may act on samples that straddle a load
	// change (nodes sample on their own clocks, so for a window some
	// report the old rate and some the new): either would pass the lease
	// back and forth, each reversal undoing a move made less than a
	// window ago. A real imbalance has other moves: only the reversal of
	// this range to this node waits.
	ReturnAfter time.Duration
}

// DefaultLeaseConfig moves a lease when one locality sends at least 60% of
// at least 10 writes per second, and twice the leaseholder's own, and not
// back to a node it left within ten minutes (the simulator's thrash
// window: a lease back where it was within ten minutes is thrash).
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{MinWriteQPS: 10, Dominance: 0.6, Hysteresis: 2, ReturnAfter: 10 * time.Minute}
}

// Validate reports a setting that cannot work.
func (c LeaseConfig) Validate() error {
	if c.MinWriteQPS < 0 || c.ReturnAfter < 0 {
		return fmt.Errorf("lease min write qps and return-after must be ≥ 0, got %v and %v", c.MinWriteQPS, c.ReturnAfter)
	}
	if c.Dominance <= 0 || c.Dominance > 1 {
		return fmt.Errorf("lease dominance must be in (0, 1], got %v", c.Dominance)
	}
	if c.Hysteresis < 1 {
		return fmt.Errorf("lease hysteresis must be at least 1, got %v", c.Hysteresis)
	}
	return nil
}

// LeaseCandidate is a replica the lease could move to.
type LeaseCandidate struct {
	Node     uint64
	Locality string
	// Voter: only voters can lead. Live: only live nodes whose clocks are
	// trusted are worth it.
	Voter, Live bool
	// Score is the node's load score (lower is better).
	Score float64
}

// LeaseInput is one range's situation at the end of a window.
type LeaseInput struct {
	Leaseholder uint64
	// Replicas include the leaseholder.
	Replicas []LeaseCandidate
	// Writes is the window's writes per second by origin locality ("":
	// unknown).
	Writes map[string]float64
}

// LeaseDecision says where the lease should go, and why.
type LeaseDecision struct {
	Target uint64
	Reason string
}

// FollowTheWriters returns the move to make, or ok=false to stay.
func FollowTheWriters(in LeaseInput, cfg LeaseConfig) (d LeaseDecision, ok bool) {
	var here string
	for _, r := range in.Replicas {
		if r.Node == in.Leaseholder {
			here = r.Locality
		}
	}
	top, share, total := dominantWriters(in.Writes, cfg)
	if top == "" || top == here || in.Writes[top] < cfg.Hysteresis*in.Writes[here] {
		return d, false
	}
	var best *LeaseCandidate
	for i := range in.Replicas {
		r := &in.Replicas[i]
		if r.Locality != top || !r.Voter || !r.Live || r.Node == in.Leaseholder {
			continue
		}
		if best == nil || r.Score < best.Score || r.Score == best.Score && r.Node < best.Node {
			best = r
		}
	}
	if best == nil {
		return d, false // no voter there: replica placement's job, not the lease's
	}
	return LeaseDecision{Target: best.Node, Reason: fmt.Sprintf("follow the writers: %.0f%% of %.0f writes/s came from %s (leaseholder's %s: %.0f/s)",
		100*share, total, top, orNone(here), in.Writes[here])}, true
}

// dominantWriters returns the known locality that sends at least Dominance
// of at least MinWriteQPS writes per second, its share and the total; ""
// when none does. Ties go to the lexically first name so the answer does
// not depend on map order.
func dominantWriters(writes map[string]float64, cfg LeaseConfig) (top string, share, total float64) {
	for _, n := range writes {
		total += n
	}
	if total < cfg.MinWriteQPS || total <= 0 {
		return "", 0, total
	}
	localities := make([]string, 0, len(writes))
	for l := range writes {
		if l != "" {
			localities = append(localities, l)
		}
	}
	sort.Strings(localities)
	for _, l := range localities {
		if top == "" || writes[l] > writes[top] {
			top = l
		}
	}
	if top == "" || writes[top]/total < cfg.Dominance {
		return "", 0, total
	}
	return top, writes[top] / total, total
}

func orNone(locality string) string {
	if locality == "" {
		return "no locality"
	}
	return locality
}

// followWriters moves each range's lease toward the locality its writes
// come from (FollowTheWriters), on fresh samples only. A range that
// completed an operator within RangeCooldown stays, and a lease does not
// go back to a node it left within Lease.ReturnAfter.
func (p *planner) followWriters() {
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		if p.leasesFull() {
			return
		}
		if len(r.Writes) == 0 || r.LoadStale || r.Leaseholder == 0 || p.taken[r.ID] || p.rangeCooling(r.ID) {
			continue
		}
		in := LeaseInput{Leaseholder: r.Leaseholder, Writes: r.Writes}
		for _, rep := range r.Replicas {
			c := LeaseCandidate{Node: rep.Node, Voter: rep.Type == Voter}
			if n := p.nodes[rep.Node]; n != nil {
				c.Locality, c.Score = n.Locality, n.Score
				c.Live = n.State == NodeLive && !n.ClockUntrusted && !p.leftLately(r.ID, n.ID)
			}
			in.Replicas = append(in.Replicas, c)
		}
		d, ok := FollowTheWriters(in, p.cfg.Lease)
		if !ok {
			continue
		}
		p.add(Operator{Kind: OpTransferLease, Range: r.ID, Source: r.Leaseholder, Target: d.Target, Policy: "follow-writers", Reason: d.Reason})
	}
}

// leftLately reports whether range id's lease left node within
// Lease.ReturnAfter: no balance policy moves it back there yet.
func (p *planner) leftLately(id, node uint64) bool {
	for _, ro := range p.s.Recent {
		if ro.Op.Kind == OpTransferLease && ro.Op.Range == id && ro.Op.Source == node &&
			p.s.Now.Sub(ro.At) <= p.cfg.Lease.ReturnAfter {
			return true
		}
	}
	return false
}

// writersHere reports whether r's writes come from its leaseholder's
// locality by FollowTheWriters' measure: balance then keeps the lease in
// that locality rather than undo what following the writers did.
func (p *planner) writersHere(r *Range, node uint64) bool {
	top, _, _ := dominantWriters(r.Writes, p.cfg.Lease)
	lh, n := p.nodes[r.Leaseholder], p.nodes[node]
	return top != "" && lh != nil && n != nil && !lh.ClockUntrusted && lh.Locality == top && n.Locality != top
}

// shedUntrustedClocks moves every lease off a node whose clock its offset
// monitor does not trust (Node.ClockUntrusted): such a node serves no
// lease reads, so each of its ranges goes to the least-loaded live voter
// whose clock is trusted. Safety, not balance: it runs with rebalancing
// off and ignores cool-downs.
func (p *planner) shedUntrustedClocks() {
	for i := range p.s.Ranges {
		r := &p.s.Ranges[i]
		lh := p.nodes[r.Leaseholder]
		if lh == nil || !lh.ClockUntrusted || p.taken[r.ID] {
			continue
		}
		t := p.bestLeaseTarget(r, func(uint64) bool { return true })
		if t == 0 {
			continue
		}
		p.add(Operator{Kind: OpTransferLease, Range: r.ID, Source: r.Leaseholder, Target: t, Policy: "clock",
			Reason: fmt.Sprintf("node %d's clock is not trusted (offset monitor): it holds no leases", r.Leaseholder)})
	}
}
