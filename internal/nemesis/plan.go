package nemesis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
)

// Kind is what a step does to its node.
type Kind int

const (
	// Kill SIGKILLs the node and restarts it For later.
	Kill Kind = iota
	// Pause SIGSTOPs the node and continues it For later: a hung node
	// that holds its connections open.
	Pause
	// Partition cuts the node's Raft traffic with every other node (both
	// ways) and heals it For later; clients still reach it, so they see
	// the minority side's refusals and timeouts. Needs nodes started with
	// --enable-fault-injection.
	Partition
	// Skew offsets the node's wall clock (its HLC and closed timestamps
	// read it; leases run on the monotonic clock) by Step.Amount and
	// removes the offset For later (needs --enable-fault-injection). Both
	// changes are steps of that clock.
	Skew
	// SlowDisk makes every sync of the node's engine wait Step.Amount,
	// until For later (needs --enable-fault-injection).
	SlowDisk
	// Bridge cuts the link between the node and Step.Peer, both ways,
	// and heals it For later: neither is isolated, each still reaches the
	// others, so the cluster stays connected through them. Raft's leader
	// and a follower that cannot talk directly, or two followers that
	// both can, are what it tests (needs --enable-fault-injection). Not in
	// AllKinds, so that recorded seeds keep their plans: ask for it.
	Bridge
	// Split cuts the cluster in two, both ways, and heals it For later:
	// one side is the node and, if Step.Peer is not 0, Peer too (never
	// more than half the nodes), the other side the rest. Unlike
	// Partition it can leave a range's majority on the small side (2 of
	// its 3 replicas on a 2-node side of 4), so each side must serve what
	// it has a quorum of and refuse the rest (needs
	// --enable-fault-injection). Not in AllKinds: ask for it.
	Split
	// Move moves the node's (Step.Node's) voter of one range to a node
	// without a replica of it, through the admin ChangeReplicas RPC,
	// while a fault is on; Step.Pick chooses the range and the node among
	// those the cluster has then. It is an operation, not a fault: a
	// fault may make it fail, and it is given up For after it starts.
	// Not in AllKinds: ask for it.
	Move
	// Churn decommissions the node (its replicas start moving away)
	// while a fault is on and recommissions it For later. An operation,
	// like Move. Not in AllKinds: ask for it.
	Churn
	// DiskFail makes every write of the node's engine fail, which must
	// stop the node at its next write, and For later restarts it on its
	// (healthy again) disk: what it acknowledged must have been durable
	// (needs --enable-fault-injection). Not in AllKinds: ask for it.
	DiskFail
	// Replace SIGKILLs the node and wipes its data, as a lost disk would,
	// and For later starts a fresh node at its addresses: it joins under
	// a new node ID, the old one is dead, and the dead node's replicas
	// must be re-created elsewhere; the step ends once they are, as a
	// second fault before that would be two at once (a range may lose
	// its quorum for good). Not in AllKinds: ask for it.
	Replace
	// RangeSplit splits a range of the workload's key space at a key
	// Step.Pick chooses among the workload's keys and the points between
	// them that start no range yet, through the admin Split RPC, while a
	// fault is on. An operation, like Move (so is every kind below). Not
	// in AllKinds: ask for it.
	RangeSplit
	// Merge joins a range of the workload's key space with its right
	// neighbour, through the admin Merge RPC; Step.Pick chooses among the
	// pairs that have the same replicas (others are refused).
	Merge
	// LeaseTransfer moves the lease of a range of the workload's key
	// space to Step.Node, through the admin TransferLease RPC; Step.Pick
	// chooses among the ranges with a voter but not the lease there.
	LeaseTransfer
)

var kindNames = []string{Kill: "kill", Pause: "pause", Partition: "partition", Skew: "skew", SlowDisk: "slow-disk", Bridge: "bridge",
	Split: "split", Move: "move", Churn: "churn", DiskFail: "disk-fail", Replace: "replace",
	RangeSplit: "range-split", Merge: "merge", LeaseTransfer: "lease-transfer"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// AllKinds is every fault kind, the default mix.
func AllKinds() []Kind { return []Kind{Kill, Pause, Partition, Skew, SlowDisk} }

// Injected reports whether kind k needs nodes started with
// --enable-fault-injection.
func (k Kind) Injected() bool {
	return k == Partition || k == Skew || k == SlowDisk || k == Bridge || k == Split || k == DiskFail
}

// Operation reports whether kind k is an administrative change (Move,
// Churn, RangeSplit, Merge, LeaseTransfer) rather than a fault: Run
// carries operations out beside the faults, so that they meet them.
func (k Kind) Operation() bool {
	return k == Move || k == Churn || k == RangeSplit || k == Merge || k == LeaseTransfer
}

// Relocates reports whether kind k moves replicas to a node that has
// none, which needs a node beyond the replication factor.
func (k Kind) Relocates() bool { return k == Move || k == Churn }

// ParseKinds reads a comma-separated list of kind names ("kill,partition").
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, name := range strings.Split(s, ",") {
		i := slices.Index(kindNames, strings.TrimSpace(name))
		if i < 0 {
			return nil, fmt.Errorf("nemesis: unknown fault %q (known: %s)", name, strings.Join(kindNames, ", "))
		}
		out = append(out, Kind(i))
	}
	return out, nil
}

// Step is one fault: at At after the start, node Node (1-based) is
// killed, paused, partitioned off, has its clock offset or its disk
// slowed by Amount, for For.
type Step struct {
	At     time.Duration
	Kind   Kind
	Node   int
	For    time.Duration
	Amount time.Duration // Skew: the clock offset; SlowDisk: the delay per sync
	// Peer is, for Bridge, the node cut from Node; for Split, the node on
	// Node's side (0: Node alone). 1-based.
	Peer int
	// Pick chooses, for Move, the range and the node it moves to among
	// those the cluster has when the step runs.
	Pick uint64
}

func (s Step) String() string {
	what := s.Kind.String()
	switch s.Kind {
	case Skew:
		what = fmt.Sprintf("skew (%+v)", s.Amount)
	case SlowDisk:
		what = fmt.Sprintf("slow disk (%v per sync)", s.Amount)
	case Bridge:
		return fmt.Sprintf("%v: bridge: cut node %d from node %d for %v", s.At.Round(time.Millisecond), s.Node, s.Peer, s.For)
	case Split:
		side := fmt.Sprint(s.Node)
		if s.Peer != 0 {
			side += fmt.Sprintf(",%d", s.Peer)
		}
		return fmt.Sprintf("%v: split: cut nodes %s from the rest for %v", s.At.Round(time.Millisecond), side, s.For)
	case Move:
		return fmt.Sprintf("%v: move a replica off node %d, giving up after %v", s.At.Round(time.Millisecond), s.Node, s.For)
	case RangeSplit, Merge:
		return fmt.Sprintf("%v: %s a range of the workload's keys, giving up after %v", s.At.Round(time.Millisecond), s.Kind, s.For)
	case LeaseTransfer:
		return fmt.Sprintf("%v: transfer a lease to node %d, giving up after %v", s.At.Round(time.Millisecond), s.Node, s.For)
	case Churn:
		what = "decommission"
	case DiskFail:
		what = "fail the disk of"
	case Replace:
		return fmt.Sprintf("%v: replace node %d with a fresh one after %v", s.At.Round(time.Millisecond), s.Node, s.For)
	}
	return fmt.Sprintf("%v: %s node %d for %v", s.At.Round(time.Millisecond), what, s.Node, s.For)
}

// sides are the nodes a Bridge or Split cuts apart: a from b (nil: from
// every other node).
func (s Step) sides() (a, b []int) {
	if s.Kind == Bridge {
		return []int{s.Node}, []int{s.Peer}
	}
	if a = []int{s.Node}; s.Peer != 0 {
		a = append(a, s.Peer)
	}
	return a, nil
}

// Config shapes a plan. Durations are wall-clock.
type Config struct {
	// Duration is how long faults are injected.
	Duration time.Duration
	// Interval is the time from one fault's start to the next's.
	Interval time.Duration
	// Down is how long a fault lasts (< Interval, so one fault is on at a
	// time: every range keeps a quorum, except that a split may leave a
	// range's majority on either side). An operation (Move, Churn) may
	// overlap the next slot's fault.
	Down time.Duration
	// Kinds are the faults a step picks from, uniformly; a kind listed
	// twice is twice as likely.
	Kinds []Kind
	// MaxSkew bounds a skew step's offset, drawn uniformly in whole
	// milliseconds from [-MaxSkew, MaxSkew]. Adding or removing an offset
	// steps the node's wall clock: leases do not read it (they run on the
	// monotonic clock), closed timestamps and the HLC do. Beyond 0.8 × the
	// cluster's --max-offset the skewed node's offset monitor makes it
	// give up its leases.
	MaxSkew time.Duration
	// DiskDelay is how long each sync of a slowed disk waits.
	DiskDelay time.Duration
	// Nodes is the number of nodes faults pick from.
	Nodes int
}

// DefaultConfig is a fault every 8 s, down for 3 s, every kind alike, for
// a minute on 4 nodes. 3 s is past the 1 s election timeout, so a
// partitioned leaseholder loses its leases. Skews are within ±max offset
// / 2 (125 ms at the default --max-offset): with one node faulty at a
// time two nodes differ by at most that, and even two skewed at once by
// at most the max offset, so the offset monitor takes no lease away. A slowed disk
// takes 100 ms per sync, a hundred times or more a healthy one's.
func DefaultConfig() Config {
	return Config{Duration: time.Minute, Interval: 8 * time.Second, Down: 3 * time.Second, Kinds: AllKinds(),
		MaxSkew: hlc.DefaultMaxOffset / 2, DiskDelay: 100 * time.Millisecond, Nodes: 4}
}

// Validate reports the first setting that cannot work, in one sentence.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1:
		return fmt.Errorf("nemesis: %d nodes: need at least one", c.Nodes)
	case c.Interval <= 0 || c.Down <= 0:
		return errors.New("nemesis: interval and down time must be positive")
	case c.Down >= c.Interval:
		return fmt.Errorf("nemesis: down time %v must be shorter than the interval %v (one node down at a time)", c.Down, c.Interval)
	case c.Duration < c.Interval:
		return fmt.Errorf("nemesis: duration %v is shorter than one interval %v", c.Duration, c.Interval)
	case len(c.Kinds) == 0:
		return errors.New("nemesis: no fault kinds to pick from")
	case c.MaxSkew < 0 || c.DiskDelay < 0:
		return errors.New("nemesis: max skew and disk delay must not be negative")
	}
	for _, k := range c.Kinds {
		if k < 0 || int(k) >= len(kindNames) {
			return fmt.Errorf("nemesis: unknown fault %v", k)
		}
		if k == Bridge && c.Nodes < 3 {
			return fmt.Errorf("nemesis: a bridge needs at least 3 nodes (two cut apart and one they both reach), not %d", c.Nodes)
		}
		if k == Split && c.Nodes < 3 {
			return fmt.Errorf("nemesis: a split needs at least 3 nodes (a side of one and a majority side of two), not %d", c.Nodes)
		}
	}
	return nil
}

// Plan returns the faults of one schedule: the same seed and config give
// the same steps. The first fault comes one interval minus the down time
// in, so the cluster starts healthy; the last one ends within Duration.
// A slot that draws an operation (Move, Churn) also gets a fault, drawn
// from the fault kinds of c.Kinds (if any), and the operation starts
// halfway through that fault, when it has taken hold, and lasts Down
// (less if Duration ends first).
func Plan(seed uint64, c Config) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65))
	faults := slices.DeleteFunc(slices.Clone(c.Kinds), Kind.Operation)
	var steps []Step
	for at := c.Interval - c.Down; at+c.Down <= c.Duration; at += c.Interval {
		st := drawStep(rng, c, at, c.Kinds[rng.IntN(len(c.Kinds))])
		if st.Kind.Operation() {
			if len(faults) > 0 {
				steps = append(steps, drawStep(rng, c, at, faults[rng.IntN(len(faults))]))
			}
			st.At += c.Down / 2
			st.For = min(c.Down, c.Duration-st.At)
		}
		steps = append(steps, st)
	}
	return steps
}

// drawStep draws the node and the kind's details of a kind step at at.
// Recorded seeds' plans depend on the order of its draws.
func drawStep(rng *rand.Rand, c Config, at time.Duration, kind Kind) Step {
	st := Step{At: at, Kind: kind, Node: 1 + rng.IntN(c.Nodes), For: c.Down}
	other := func() int { return 1 + (st.Node+rng.IntN(c.Nodes-1))%c.Nodes }
	switch st.Kind {
	case Skew:
		ms := int64(c.MaxSkew / time.Millisecond) // whole milliseconds read better in logs
		st.Amount = time.Duration(rng.Int64N(2*ms+1)-ms) * time.Millisecond
	case SlowDisk:
		st.Amount = c.DiskDelay
	case Bridge:
		st.Peer = other()
	case Split:
		// A second node on the small side only while it stays at most
		// half: with 4 nodes, a 2-2 split, where every 3-replica range
		// has its majority on exactly one side.
		if c.Nodes >= 4 && rng.IntN(2) == 1 {
			st.Peer = other()
		}
	case Move, RangeSplit, Merge, LeaseTransfer:
		st.Pick = rng.Uint64()
	}
	return st
}
