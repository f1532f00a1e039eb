package placement

import (
	"fmt"
	"sort"
)

// Lease placement by write origin: a range's lease belongs near the writers,
// since every write travels to the leaseholder. The leaseholder counts its
// writes by the locality they came from; when one other locality clearly
// dominates for a whole window, the lease moves to a voter there.

// LeaseConfig tunes FollowTheWriters.
type LeaseConfig struct {
	// MinWrites is the fewest writes in a window for a decision (count):
	// below it the sample says too little to move anything.
	MinWrites uint64
	// Dominance is the share of the window's writes (0..1] a locality needs
	// for the lease to move there.
	Dominance float64
	// Hysteresis is how many times more writes the winning locality must
	// have than the current leaseholder's (≥ 1), so two localities writing
	// about equally do not pass the lease back and forth.
	Hysteresis float64
}

// DefaultLeaseConfig moves a lease when one locality sends at least 60% of
// at least 100 writes in a window, and twice the leaseholder's own.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{MinWrites: 100, Dominance: 0.6, Hysteresis: 2}
}

// Validate reports a setting that cannot work.
func (c LeaseConfig) Validate() error {
	if c.Dominance <= 0 || c.Dominance > 1 {
		return fmt.Errorf("placement: lease dominance must be in (0, 1], got %v", c.Dominance)
	}
	if c.Hysteresis < 1 {
		return fmt.Errorf("placement: lease hysteresis must be at least 1, got %v", c.Hysteresis)
	}
	return nil
}

// LeaseCandidate is a replica the lease could move to.
type LeaseCandidate struct {
	Node     uint64
	Locality string
	// Voter: only voters can lead. Live: only live nodes are worth it.
	Voter, Live bool
	// Score is the node's load score (lower is better).
	Score float64
}

// LeaseInput is one range's situation at the end of a window.
type LeaseInput struct {
	Leaseholder uint64
	// Replicas include the leaseholder.
	Replicas []LeaseCandidate
	// Writes counts the window's writes by origin locality ("" unknown).
	Writes map[string]uint64
}

// LeaseDecision says where the lease should go, and why.
type LeaseDecision struct {
	Target uint64
	Reason string
}

// FollowTheWriters returns the move to make, or ok=false to stay.
func FollowTheWriters(in LeaseInput, cfg LeaseConfig) (d LeaseDecision, ok bool) {
	var total uint64
	for _, n := range in.Writes {
		total += n
	}
	if total < cfg.MinWrites || total == 0 {
		return d, false
	}
	var here string
	for _, r := range in.Replicas {
		if r.Node == in.Leaseholder {
			here = r.Locality
		}
	}
	// The busiest known locality; ties go to the lexically first name so
	// the decision does not depend on map order.
	localities := make([]string, 0, len(in.Writes))
	for l := range in.Writes {
		if l != "" {
			localities = append(localities, l)
		}
	}
	sort.Strings(localities)
	var top string
	for _, l := range localities {
		if top == "" || in.Writes[l] > in.Writes[top] {
			top = l
		}
	}
	if top == "" || top == here {
		return d, false
	}
	share := float64(in.Writes[top]) / float64(total)
	if share < cfg.Dominance || float64(in.Writes[top]) < cfg.Hysteresis*float64(in.Writes[here]) {
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
	return LeaseDecision{Target: best.Node, Reason: fmt.Sprintf("%.0f%% of %d writes came from %s (leaseholder's %s: %d)",
		100*share, total, top, orNone(here), in.Writes[here])}, true
}

func orNone(locality string) string {
	if locality == "" {
		return "no locality"
	}
	return locality
}
