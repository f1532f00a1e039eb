package control

import (
	"bytes"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
)

// Observation is what one round sees of the cluster. Ranges and Nodes
// carry what the cluster reports; the fields placement derives across
// rounds (Range.HitsEWMA, Range.SplitAt, Range.ReplicaReadPeakQPS, a plain
// learner's Replica.Since, Node.Phase) are filled in by the Controller,
// Node.Capacity by the Loop from the Autoscaler's capacity model, and
// Snapshot.Busy and InFlight by the Runner, so the server and the
// simulator leave them zero.
type Observation struct {
	Now    time.Time
	Nodes  []placement.Node
	Ranges []placement.Range
	// Boundaries are the key space boundaries (placement.Snapshot).
	Boundaries [][]byte
	// Signals are what elasticity needs beyond placement's view, by node.
	Signals map[uint64]NodeSignal
	// Caches are the key spaces with a capacity per node. Each node's
	// bytes of one are its replicas' bytes among Ranges within the span.
	Caches []CacheSpace
}

// CacheSpace is a key space with a capacity per node.
type CacheSpace struct {
	Name string
	// Start and End are its span (End nil: to the end of the keys).
	Start, End []byte
	// CapacityPerNode is the bytes of it one node may hold.
	CapacityPerNode uint64
	// Grow: when a node's share nears the capacity the cluster grows
	// (keyspace.OnFull "grow"); otherwise the node evicts.
	Grow bool
}

// Holds reports whether a range starting at start lies in the key space
// (ranges never span a key space boundary).
func (c CacheSpace) Holds(start []byte) bool {
	return bytes.Compare(start, c.Start) >= 0 && (c.End == nil || bytes.Compare(start, c.End) < 0)
}

// NodeSignal is one node's foreground signals over the last interval.
type NodeSignal struct {
	Addr string // gRPC address, for actuators and joins
	// P99 is the node's 99th percentile request latency; Ops the requests
	// it served per second, ReadShare the fraction that read; Rejected the
	// requests per second it refused as overloaded; QueueUtil its admission
	// queue's occupancy in [0,1].
	P99       time.Duration
	Ops       float64
	ReadShare float64
	Rejected  float64
	QueueUtil float64
	CPU       float64
}

// Event is something a round decided or noticed, with its reason: the
// caller records it where operators look (the event log, the simulator's
// log).
type Event struct {
	Kind    string // "placement", "bootstrap", "operator-failed", ...
	Subject string // "cluster", "node 3", "range 12"
	Reason  string
}

func (e Event) String() string { return fmt.Sprintf("%s %s: %s", e.Kind, e.Subject, e.Reason) }

// EventPolicyBug is the kind of event for an operator the loop refused
// because the policy should not have proposed it (a second operator for a
// range in one plan, or one for a range already busy).
const EventPolicyBug = "policy-bug"

// EventSink receives events. The server's event log and the simulator's
// log implement it.
type EventSink interface {
	Event(Event)
}

// Decisions are one round's output: the placement operators to run, in
// order, and the events to record.
type Decisions struct {
	Snapshot placement.Snapshot // what the policies saw
	Ops      []placement.Operator
	Events   []Event
}

// Describe is an operator with its policy and reason, as events show it.
func Describe(op placement.Operator) string {
	switch {
	case op.Policy != "" && op.Reason != "":
		return fmt.Sprintf("%s (%s: %s)", op, op.Policy, op.Reason)
	case op.Policy != "" || op.Reason != "":
		return fmt.Sprintf("%s (%s%s)", op, op.Policy, op.Reason)
	}
	return op.String()
}
