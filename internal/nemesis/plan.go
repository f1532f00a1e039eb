package nemesis

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Kind is what a step does to its node.
type Kind int

const (
	// Kill SIGKILLs the node and restarts it For later.
	Kill Kind = iota
	// Pause SIGSTOPs the node and continues it For later: a hung node
	// that holds its connections open, as a partitioned one looks.
	Pause
)

func (k Kind) String() string {
	if k == Pause {
		return "pause"
	}
	return "kill"
}

// Step is one fault: at At after the start, node Node (1-based) is
// killed or paused for For.
type Step struct {
	At   time.Duration
	Kind Kind
	Node int
	For  time.Duration
}

func (s Step) String() string {
	return fmt.Sprintf("%v: %s node %d for %v", s.At.Round(time.Millisecond), s.Kind, s.Node, s.For)
}

// Config shapes a plan. Durations are wall-clock.
type Config struct {
	// Duration is how long faults are injected.
	Duration time.Duration
	// Interval is the time from one fault's start to the next's.
	Interval time.Duration
	// Down is how long a node stays killed or paused (< Interval, so at
	// most one node is down at a time and every range keeps a quorum).
	Down time.Duration
	// PauseShare is the share (0..1) of faults that are pauses.
	PauseShare float64
	// Nodes is the number of nodes faults pick from.
	Nodes int
}

// DefaultConfig is a fault every 8 s, down for 3 s, one in three a pause,
// for a minute on 4 nodes.
func DefaultConfig() Config {
	return Config{Duration: time.Minute, Interval: 8 * time.Second, Down: 3 * time.Second, PauseShare: 1.0 / 3, Nodes: 4}
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
	case c.PauseShare < 0 || c.PauseShare > 1:
		return fmt.Errorf("nemesis: pause share %v must be within 0..1", c.PauseShare)
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
		k := Kill
		if rng.Float64() < c.PauseShare {
			k = Pause
		}
		steps = append(steps, Step{At: at, Kind: k, Node: 1 + rng.IntN(c.Nodes), For: c.Down})
	}
	return steps
}
