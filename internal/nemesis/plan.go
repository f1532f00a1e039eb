package nemesis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/hlc"
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
)

var kindNames = []string{Kill: "kill", Pause: "pause", Partition: "partition", Skew: "skew", SlowDisk: "slow-disk", Bridge: "bridge"}

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
func (k Kind) Injected() bool { return k == Partition || k == Skew || k == SlowDisk || k == Bridge }

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
	Peer   int           // Bridge: the node cut from Node (1-based)
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
	}
	return fmt.Sprintf("%v: %s node %d for %v", s.At.Round(time.Millisecond), what, s.Node, s.For)
}

// Config shapes a plan. Durations are wall-clock.
type Config struct {
	// Duration is how long faults are injected.
	Duration time.Duration
	// Interval is the time from one fault's start to the next's.
	Interval time.Duration
	// Down is how long a fault lasts (< Interval, so at most one node is
	// faulty at a time and every range keeps a quorum).
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
	}
	return nil
}

// Plan returns the faults of one schedule: the same seed and config give
// the same steps. The first fault comes one interval minus the down time
// in, so the cluster starts healthy; the last one ends within Duration.
func Plan(seed uint64, c Config) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65))
	var steps []Step
	for at := c.Interval - c.Down; at+c.Down <= c.Duration; at += c.Interval {
		st := Step{At: at, Kind: c.Kinds[rng.IntN(len(c.Kinds))], Node: 1 + rng.IntN(c.Nodes), For: c.Down}
		switch st.Kind {
		case Skew:
			ms := int64(c.MaxSkew / time.Millisecond) // whole milliseconds read better in logs
			st.Amount = time.Duration(rng.Int64N(2*ms+1)-ms) * time.Millisecond
		case SlowDisk:
			st.Amount = c.DiskDelay
		case Bridge:
			st.Peer = 1 + (st.Node+rng.IntN(c.Nodes-1))%c.Nodes // any other node
		}
		steps = append(steps, st)
	}
	return steps
}
