package ctlloop

import (
	"context"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/settings"
)

// Every Control.Interval the meta leaseholder observes the cluster from
// the range directory, the range reports and the node heartbeats, and
// hands the observation to the loop; the loop's runner executes operators
// through Deps.Exec, i.e. the same range operations an operator's ctl
// commands run.

// Node is the node as its control loop sees it.
type Node interface {
	// MetaLeader is the local meta replica if it holds the lease (nil:
	// no round here); LivenessKnown says whether liveness has been learnt
	// since it was acquired.
	MetaLeader() *raftstore.Replica
	LivenessKnown() bool
	// Ranges reads the range directory from meta (a lease read first).
	Ranges(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.RangesResponse, error)
	// Observe is a round's observation of ranges at now, with the key
	// spaces placement must respect.
	Observe(meta *raftstore.Replica, ranges *tidekvpb.RangesResponse, now time.Time) control.Observation
	// Config is the node's configuration with the cluster settings applied.
	Config() settings.Config
	// ReadState reads the stored controller state once meta may be read
	// from (nil: none stored); SaveState stores raw through the meta
	// range's log; StoresState says whether the cluster's log version
	// lets it (an older binary would refuse the entry).
	ReadState(ctx context.Context, meta *raftstore.Replica) ([]byte, error)
	SaveState(ctx context.Context, meta *raftstore.Replica, raw []byte) error
	StoresState() bool
	// Actuator builds the actuator a policy names.
	Actuator(name string) (control.Actuator, error)
	// Decommission drains a node for a scale-in (or keeps it after all).
	control.Decommissioner
	// Overflow exports the overflow policy's view of the key space name.
	Overflow(name string, thresholdBytes, fullestBytes float64)
	// Record adds an event to the node's log.
	Record(kind, subject, format string, args ...any)
}

// Deps are what a Loop is made of.
type Deps struct {
	Control   control.Config
	Placement placement.Config
	Autoscale elastic.Policy
	Node      Node
	Exec      control.Executor
	// Spawn runs an actuator's blocking calls; Now is the time.
	Spawn control.Spawn
	Now   control.Clock
}

// Loop is the node's handle on the control loop. The loop's controller
// is not safe for concurrent use: mu serialises rounds, resets and status
// reads.
type Loop struct {
	mu           sync.Mutex
	loop         *control.Loop
	actuatorName string // the autoscaler's actuator ("": none yet)
	store        store
	// wake asks for a placement round before the next (Wake).
	wake chan struct{}
	node Node
	d    Deps
}

// New makes the node's control loop.
func New(d Deps) *Loop {
	sink := eventSink{d.Node}
	runner := control.NewRunner(d.Control.Runner, d.Exec, d.Now, sink)
	return &Loop{wake: make(chan struct{}, 1), node: d.Node, d: d, loop: &control.Loop{
		Controller: control.NewController(d.Control, d.Placement),
		Runner:     runner,
		Sink:       sink,
		Autoscaler: control.NewAutoscaler(d.Autoscale, d.Control.Interval, nil, runner, sink),
	}}
}

// Reset forgets the controller's soft state (the meta lease was
// acquired); the elasticity controller's is resumed from the meta range
// instead.
func (c *Loop) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loop.Controller.Reset()
	c.store.resume = true
}

// Phase returns a node's bootstrap phase.
func (c *Loop) Phase(node uint64) placement.Phase {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loop.Controller.Phase(node)
}

// Wake asks the control loop for an early placement round.
func (c *Loop) Wake() {
	select {
	case c.wake <- struct{}{}:
	default: // a round is already due
	}
}

// Woken is where Wake asks for a round (Urgent).
func (c *Loop) Woken() <-chan struct{} { return c.wake }

// MigrationRate is the runner's migration allowance; OpTimeout bounds
// one operator.
func (c *Loop) MigrationRate() float64          { return c.loop.Runner.MigrationRate() }
func (c *Loop) OpTimeout() time.Duration        { return c.loop.Runner.Config().OpTimeout }
func (c *Loop) Status() control.AutoscaleStatus { return c.loop.Autoscaler.Status() }

// Hold stops every round until release is called (a round waits for the
// controller's lock, which Hold takes); WithAutoscaler runs f on the
// autoscaler under that lock. Tests use both.
func (c *Loop) Hold() (release func()) {
	c.mu.Lock()
	return c.mu.Unlock
}

func (c *Loop) WithAutoscaler(f func(*control.Autoscaler)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c.loop.Autoscaler)
}

// Round runs one control round if this node holds the meta lease.
func (c *Loop) Round(ctx context.Context) { c.round(ctx, false) }

// Urgent runs placement alone, woken between rounds.
func (c *Loop) Urgent(ctx context.Context) { c.round(ctx, true) }

func (c *Loop) round(ctx context.Context, urgent bool) {
	n := c.node
	meta := n.MetaLeader()
	if meta == nil || !n.LivenessKnown() {
		return // not leaseholder, or liveness still being learnt
	}
	resp, err := n.Ranges(ctx, meta)
	if err != nil {
		return
	}
	var stored []byte
	resume := !urgent && c.resuming()
	if resume {
		if stored, err = n.ReadState(ctx, meta); err != nil {
			return // not readable yet: the round waits, so a fresh state is never stored over it
		}
	}
	obs := n.Observe(meta, resp, c.d.Now())
	cfg := n.Config()
	c.mu.Lock()
	c.loop.Controller.SetPolicy(cfg.Placement)
	if urgent {
		c.loop.Urgent(obs)
		c.mu.Unlock()
		return
	}
	c.applyAutoscale(cfg.Autoscale)
	if resume {
		c.resumeLocked(stored, obs.Now)
	}
	c.loop.Round(obs)
	for _, st := range c.loop.Autoscaler.Status().Caches {
		n.Overflow(st.Name, st.ThresholdBytes, st.FullestBytes)
	}
	save := c.stateToSaveLocked(obs.Now)
	c.mu.Unlock()
	if save != nil {
		c.saveState(ctx, meta, save, obs.Now)
	}
}

// eventSink records the control loop's events in the node's event log.
type eventSink struct{ n Node }

func (e eventSink) Event(ev control.Event) { e.n.Record(ev.Kind, ev.Subject, "%s", ev.Reason) }
