package sim

import (
	"time"

	"github.com/tidekv/tidekv/internal/placement"
)

// Counters count what happened since the simulation started. Operators are
// counted when they complete.
type Counters struct {
	Decisions int
	// Started operators (all kinds) and the completed ones by kind.
	Started                                int
	AddVoters, AddLearners, Removes, Moves int
	LeaseTransfers, Splits, Merges         int
	BytesMoved                             uint64
	// Failed: started (or about to) and could not complete. Throttled: over
	// a runner limit, not started. PolicyBugs: invalid, refused.
	Failed, Throttled, PolicyBugs int
	// ThrashReplicas: a replica added to a node its range left (while the
	// node was live) within the thrash window; ThrashLeases: a lease transferred back to the node it
	// came from within the window. Unsplits: a merge undoing a split within
	// the window (reported, not counted as thrash: load splits are meant to
	// be merged back once the load is gone).
	ThrashReplicas, ThrashLeases, Unsplits int
}

// ReplicaChanges is adds (voters and learners), removes and moves.
func (c Counters) ReplicaChanges() int { return c.AddVoters + c.AddLearners + c.Removes + c.Moves }

// Thrash is ThrashReplicas + ThrashLeases.
func (c Counters) Thrash() int { return c.ThrashReplicas + c.ThrashLeases }

// Sub is c − o, for the counts of one run.
func (c Counters) Sub(o Counters) Counters {
	return Counters{
		Decisions: c.Decisions - o.Decisions, Started: c.Started - o.Started,
		AddVoters: c.AddVoters - o.AddVoters, AddLearners: c.AddLearners - o.AddLearners,
		Removes: c.Removes - o.Removes, Moves: c.Moves - o.Moves,
		LeaseTransfers: c.LeaseTransfers - o.LeaseTransfers, Splits: c.Splits - o.Splits, Merges: c.Merges - o.Merges,
		BytesMoved: c.BytesMoved - o.BytesMoved,
		Failed:     c.Failed - o.Failed, Throttled: c.Throttled - o.Throttled, PolicyBugs: c.PolicyBugs - o.PolicyBugs,
		ThrashReplicas: c.ThrashReplicas - o.ThrashReplicas, ThrashLeases: c.ThrashLeases - o.ThrashLeases,
		Unsplits: c.Unsplits - o.Unsplits,
	}
}

// Imbalance holds imbalance indices (placement.Index: standard deviation
// over mean) over the live nodes.
type Imbalance struct{ Replicas, Leases, Bytes, QPS float64 }

// NodeStat is one node at one step.
type NodeStat struct {
	ID       uint64
	Locality string
	State    placement.NodeState
	Phase    placement.Phase
	// Gone: decommissioned and left.
	Gone             bool
	Replicas, Leases int
	Bytes            uint64
	QPS, CPU, Score  float64
}

// Step is the cluster after one decision.
type Step struct {
	At    time.Duration
	Nodes []NodeStat
	// Ranges; UnderReplicated: fewer up voters than the replication
	// factor; OverReplicated: more voters; Unavailable: no leaseholder up.
	Ranges, UnderReplicated, OverReplicated, Unavailable int
	InFlight                                             int
	Imbalance                                            Imbalance
	Total                                                Counters
}

// Stat describes the cluster now.
func (s *Sim) Stat() Step {
	st := Step{At: s.clock.Elapsed(), Ranges: len(s.ranges), InFlight: len(s.flights), Total: s.Total()}
	st.UnderReplicated, st.OverReplicated, st.Unavailable = s.health(s.rf)
	var reps, leases, bytes, qps []float64
	for _, n := range s.nodes {
		st.Nodes = append(st.Nodes, NodeStat{
			ID: n.id, Locality: n.spec.Locality, State: n.state, Phase: s.phase(n.id), Gone: n.gone,
			Replicas: n.replicas, Leases: n.leases, Bytes: uint64(n.bytes), QPS: n.load, CPU: n.cpu, Score: n.score,
		})
		if n.state == placement.NodeLive && !n.gone {
			reps = append(reps, float64(n.replicas))
			leases = append(leases, float64(n.leases))
			bytes = append(bytes, n.bytes)
			qps = append(qps, n.load)
		}
	}
	st.Imbalance = Imbalance{
		Replicas: placement.Index(reps), Leases: placement.Index(leases),
		Bytes: placement.Index(bytes), QPS: placement.Index(qps),
	}
	return st
}

func (s *Sim) record() { s.steps = append(s.steps, s.Stat()) }

// Steps returns the cluster after each decision so far.
func (s *Sim) Steps() []Step { return append([]Step(nil), s.steps...) }

// Ops returns the operators that ended so far.
func (s *Sim) Ops() []OpRecord { return append([]OpRecord(nil), s.ops...) }

// Total returns the counters since the start.
func (s *Sim) Total() Counters {
	c := s.total
	c.Throttled = s.loop.Runner.Stats().Throttled
	return c
}

// thrashTracker remembers recent departures, lease transfers and splits.
type thrashTracker struct {
	leftAt    map[[2]uint64]time.Time // (range, node) → when the replica left
	lastLease map[uint64]leaseMove
	splitOf   map[uint64]splitRecord // right range → its left sibling
}

type leaseMove struct {
	from, to uint64
	at       time.Time
}

type splitRecord struct {
	left uint64
	at   time.Time
}

func (t *thrashTracker) init() {
	t.leftAt = map[[2]uint64]time.Time{}
	t.lastLease = map[uint64]leaseMove{}
	t.splitOf = map[uint64]splitRecord{}
}

func (t *thrashTracker) left(rangeID, node uint64, now time.Time) {
	t.leftAt[[2]uint64{rangeID, node}] = now
}

func (t *thrashTracker) arrived(s *Sim, rangeID, node uint64, now time.Time) {
	k := [2]uint64{rangeID, node}
	if at, ok := t.leftAt[k]; ok && now.Sub(at) <= s.opts.ThrashWindow {
		s.total.ThrashReplicas++
		s.logf("thrash: range %d's replica back on n%d %s after it left", rangeID, node, fmtDur(now.Sub(at)))
	}
	delete(t.leftAt, k)
}

func (t *thrashTracker) leaseMoved(s *Sim, rangeID, from, to uint64, now time.Time) {
	if last, ok := t.lastLease[rangeID]; ok && last.from == to && last.to == from && now.Sub(last.at) <= s.opts.ThrashWindow {
		s.total.ThrashLeases++
		s.logf("thrash: range %d's lease n%d→n%d→n%d within %s", rangeID, to, from, to, fmtDur(now.Sub(last.at)))
	}
	t.lastLease[rangeID] = leaseMove{from: from, to: to, at: now}
}

func (t *thrashTracker) split(left, right uint64, now time.Time) {
	t.splitOf[right] = splitRecord{left: left, at: now}
}

func (t *thrashTracker) merged(s *Sim, left, right uint64, now time.Time) {
	if rec, ok := t.splitOf[right]; ok && rec.left == left && now.Sub(rec.at) <= s.opts.ThrashWindow {
		s.total.Unsplits++
	}
	delete(t.splitOf, right)
}
