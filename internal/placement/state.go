package placement

import (
	"fmt"
	"time"
)

// NodeState is what placement knows of a node's membership.
type NodeState int

const (
	// NodeLive serves and may receive replicas.
	NodeLive NodeState = iota
	// NodeSuspect missed heartbeats recently; nothing moves to or from it
	// yet (it may come back).
	NodeSuspect
	// NodeDead has been unreachable beyond the grace period: its replicas
	// are replaced elsewhere.
	NodeDead
	// NodeDraining is being decommissioned: its replicas move away, nothing
	// moves to it.
	NodeDraining
)

func (s NodeState) String() string {
	switch s {
	case NodeLive:
		return "live"
	case NodeSuspect:
		return "suspect"
	case NodeDead:
		return "dead"
	case NodeDraining:
		return "draining"
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Phase is a new node's bootstrap phase (two-phase bootstrap).
type Phase int

const (
	// PhaseNone: an established node.
	PhaseNone Phase = iota
	// PhaseOne: just joined; takes a small share of replicas and leases
	// from the busiest nodes so it serves within seconds.
	PhaseOne
	// PhaseTwo: keeps pulling, throttled, until balanced.
	PhaseTwo
)

func (p Phase) String() string {
	switch p {
	case PhaseNone:
		return ""
	case PhaseOne:
		return "bootstrap phase 1"
	case PhaseTwo:
		return "bootstrap phase 2"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// Node is one node in a Snapshot.
type Node struct {
	ID       uint64
	Locality string
	State    NodeState
	Phase    Phase
	// Bytes of user data, requests per second and CPU utilisation (0..1)
	// as the node last reported them; Score is its load score (lower is
	// better).
	Bytes uint64
	QPS   float64
	CPU   float64
	Score float64
	// ClockUntrusted: the node's clock is too far from its peers' for it
	// to hold leases (its offset monitor says so), so no lease is moved to it.
	ClockUntrusted bool
	// Capacity is the node's measured capacity (requests/s at the SLO, as
	// the elasticity capacity model learnt it from the node's load and CPU
	// reports, interference included); 0: not measured. Lease balance aims
	// each live node's leases and load at its share of the live nodes'
	// capacity, counting a node not measured at the mean of those that are.
	Capacity float64
}

// ReplicaType mirrors the API's replica types that placement reasons about.
type ReplicaType int

const (
	Voter ReplicaType = iota
	Learner
)

// Replica is one replica of a Range.
type Replica struct {
	Node uint64
	Type ReplicaType
	// Adaptive marks a learner added for read load (it is removed when the
	// range cools), as opposed to one half way to becoming a voter.
	Adaptive bool
	// Since is when this replica was first seen as what it is (a voter or
	// a plain learner) with no replica change running (zero: unknown): a
	// learner's tells a move in progress from one whose coordinator died,
	// a voter's holds a surplus for SurplusGrace.
	Since time.Time
}

// Range is one range in a Snapshot.
type Range struct {
	ID         uint64
	Start, End []byte
	// Generation is the descriptor generation observed (0: unknown).
	Generation uint64
	Replicas   []Replica
	// Leaseholder is 0 when unknown.
	Leaseholder uint64
	Bytes       uint64
	// QPS is all requests per second; ReadQPS the reads among them;
	// HitsEWMA a smoothed request rate used to order a node's ranges.
	// All three are the leaseholder's.
	QPS, ReadQPS, HitsEWMA float64
	// ReplicaReadQPS is the reads per second its other replicas
	// (followers, learners) serve, as their nodes last reported: reads a
	// learner took over still count as the range's.
	ReplicaReadQPS float64
	// ReplicaReadsUnknown: a node holding one of its other replicas has
	// not reported lately (its heartbeat is missing or late), so
	// ReplicaReadQPS may leave out reads that replica serves; the range
	// must not be judged cooled on it.
	ReplicaReadsUnknown bool
	// ReplicaReadPeakQPS is the highest ReplicaReadQPS over the last
	// RangeCooldown, as the controller saw it round by round; +Inf when
	// it has watched the range for less than that or the reads were
	// unknown in it (ReplicaReadsUnknown). A learner's node reports its
	// reads over short windows, and one window can catch it serving few
	// (a starved process, a client that paused): a learner that served
	// the range's reads within the cool-down is still serving them.
	ReplicaReadPeakQPS float64
	// SplitAt is when the range last split (zero if never or unknown).
	SplitAt time.Time
	// Writes is the leaseholder's writes per second by origin locality
	// ("": unknown) over the same window as QPS (nil: none counted).
	Writes map[string]float64
	// HotKeyShare is the share (0..1) of the range's sampled requests that
	// went to its single hottest key; near 1 no split can spread the load.
	HotKeyShare float64
	// MergingInto is non-zero while the range is frozen for a merge into
	// that range.
	MergingInto uint64
	// LoadStale: QPS, ReadQPS and HotKeyShare do not cover a full sampling
	// window of the current leaseholder (its lease, or the range after a
	// split or merge, is younger than a window). Such numbers understate
	// the load, so policies that weigh load leave the range alone and do
	// not trust its leaseholder's total until a fresh sample arrives.
	LoadStale bool
	// ChangeInProgress: the leaseholder last reported a replica change
	// running, so a plain learner is that change's, not left over.
	ChangeInProgress bool
	// RF is the replication factor of the range's key space (0: the
	// cluster's, Config.ReplicationFactor).
	RF int
	// ControlLoop marks the range whose leaseholder runs the control loop
	// (the meta range). Moving its lease restarts the loop's soft state,
	// so balancing leaves it alone while a node bootstraps.
	ControlLoop bool
}

// Snapshot is everything a policy may look at. Policies read Now from it
// instead of the clock.
type Snapshot struct {
	Now    time.Time
	Nodes  []Node
	Ranges []Range
	// Busy lists the ranges with an operator in flight; policies leave
	// them alone.
	Busy map[uint64]bool
	// InFlight are the operators still running; their effect on replica
	// and lease counts is counted as done, so a decision made while a move
	// is under way does not start a second one for the same imbalance.
	InFlight []Operator
	// Boundaries are the keys, ascending, that no range may span: the
	// edges of the key spaces (keyspace.Catalogue.Boundaries). A range
	// across one is split at it; no merge joins ranges across one.
	Boundaries [][]byte
	// Recent are the operators completed lately (the longest cool-down of
	// Config is enough history), for the cool-downs after a move.
	Recent []RecentOp
}

// RecentOp is an operator that completed at At.
type RecentOp struct {
	Op Operator
	At time.Time
}

// OpKind says what an Operator does.
type OpKind int

const (
	// OpAddVoter adds a voter on Target (learner, snapshot, catch-up,
	// promotion, done by the range's leaseholder as one step).
	OpAddVoter OpKind = iota
	// OpAddLearner adds an adaptive learner on Target: a read replica for a
	// hot range, removed when the range cools.
	OpAddLearner
	// OpRemoveReplica removes Source's replica.
	OpRemoveReplica
	// OpMoveReplica adds a voter on Target and removes Source's replica in
	// one joint change.
	OpMoveReplica
	// OpTransferLease hands the lease to Target.
	OpTransferLease
	// OpSplit splits the range at SplitKey, or at the key that halves its
	// data when SplitKey is empty.
	OpSplit
	// OpMerge merges the range with its right neighbour Other.
	OpMerge
)

// Together reports whether operators a and b may run on one range at
// the same time: adaptive learners on different nodes, which one decision
// adds together for a range whose reads need several (the leaseholder
// applies replica changes one at a time; the runner starts them at once so
// none waits for another round). Every other operator has its range alone.
func Together(a, b Operator) bool {
	return a.Kind == OpAddLearner && b.Kind == OpAddLearner && a.Range == b.Range && a.Target != b.Target
}

func (k OpKind) String() string {
	switch k {
	case OpAddVoter:
		return "add-voter"
	case OpAddLearner:
		return "add-learner"
	case OpRemoveReplica:
		return "remove-replica"
	case OpMoveReplica:
		return "move-replica"
	case OpTransferLease:
		return "transfer-lease"
	case OpSplit:
		return "split"
	case OpMerge:
		return "merge"
	}
	return fmt.Sprintf("op(%d)", int(k))
}

// Operator is one decision: a value the runner executes.
type Operator struct {
	Kind   OpKind
	Range  uint64
	Source uint64 // node giving up a replica or the lease
	Target uint64 // node receiving a replica or the lease
	// SplitKey for OpSplit ("" = the leaseholder picks: the key that halves
	// the data, or with SplitByLoad the load-weighted median of sampled
	// requests); Other for OpMerge.
	SplitKey    []byte
	SplitByLoad bool
	Other       uint64
	// Generation, for OpSplit, is the range's descriptor generation the
	// decision saw: the leaseholder does nothing if the range has split
	// or merged since, as the decision was about another span (0: no
	// check).
	Generation uint64
	// Policy names the policy that decided; Reason says why, for events.
	Policy, Reason string
	// Bytes the operator moves between nodes (a replica's data), for
	// rate limiting.
	Bytes uint64
}

func (o Operator) String() string {
	s := fmt.Sprintf("%s range %d", o.Kind, o.Range)
	if o.Source != 0 {
		s += fmt.Sprintf(" from node %d", o.Source)
	}
	if o.Target != 0 {
		s += fmt.Sprintf(" to node %d", o.Target)
	}
	if o.Kind == OpMerge {
		s += fmt.Sprintf(" with range %d", o.Other)
	}
	return s
}
