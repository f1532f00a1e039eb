package sim

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/placement"
)

// Sim is one simulated cluster. It is not safe for concurrent use.
type Sim struct {
	opts     Options
	clock    *Clock
	rng      *rand.Rand
	fg       *rand.Rand // the foreground model's (foreground.go)
	policy   Policy
	rf       int
	workload Workload
	dist     *keyDist

	nodes       []*node // by ID
	ranges      []*rangeState
	byID        map[uint64]*rangeState
	lastRangeID uint64

	flights []*flight // in start order
	loop    *control.Loop

	// With a load curve: the offered load follows it and every tick is
	// recorded in series.
	curve  LoadCurve
	series []ElasticPoint

	// With an autoscaler: its scaler, and when each node it started
	// joins (with startSpec).
	scaler    *control.Scaler
	starting  []time.Time
	startSpec NodeSpec

	// With a cache key space: its capacity and what it went through.
	cache *cacheState

	nextDecide time.Time

	total  Counters
	thrash thrashTracker
	steps  []Step
	log    []LogEntry
	seen   map[string]bool // deduplicated notes and policy bugs
	ops    []OpRecord
	// reporter is what the policy knows of range load (report.go).
	reporter loadReporter
}

// New builds a simulation of cluster c under workload w, run by policy p.
func New(c ClusterSpec, w Workload, p Policy, o Options) (*Sim, error) {
	o = o.withDefaults()
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if err := p.Config.Validate(); err != nil {
		return nil, fmt.Errorf("sim: policy %q: %w", p.Name, err)
	}
	s := &Sim{
		opts:     o,
		clock:    NewClock(),
		rng:      rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		fg:       newForegroundSource(o.Seed),
		policy:   p,
		rf:       c.RF,
		workload: w,
		byID:     map[uint64]*rangeState{},
		seen:     map[string]bool{},
	}
	if p.Config.ReplicationFactor > 0 {
		s.rf = p.Config.ReplicationFactor
	}
	sink := simSink{s}
	s.loop = &control.Loop{
		Controller: control.NewController(o.Control, p.Config),
		Runner:     control.NewRunner(o.Control.Runner, simExecutor{s}, s.clock.Now, sink),
		Sink:       sink,
	}
	s.loop.Controller.SetDecider(p.Decide)
	s.dist = newKeyDist(w, s.rng)
	if err := s.newCluster(c); err != nil {
		return nil, err
	}
	s.thrash.init()
	s.nextDecide = Epoch.Add(o.Control.Interval)
	s.refreshRanges()
	s.computeLoads()
	return s, nil
}

// Now is the virtual time since the simulation started.
func (s *Sim) Now() time.Duration { return s.clock.Elapsed() }

// SetPolicy replaces the policy (a configuration change).
func (s *Sim) SetPolicy(p Policy) error {
	if err := p.Config.Validate(); err != nil {
		return fmt.Errorf("sim: policy %q: %w", p.Name, err)
	}
	s.policy = p
	if p.Config.ReplicationFactor > 0 {
		s.rf = p.Config.ReplicationFactor
	}
	s.loop.Controller.SetPolicy(p.Config)
	s.loop.Controller.SetDecider(p.Decide)
	return nil
}

// Options returns the options in effect.
func (s *Sim) Options() Options { return s.opts }

// SetOptions changes the options from now on (zero fields take defaults;
// the seed only matters at New).
func (s *Sim) SetOptions(o Options) {
	s.opts = o.withDefaults()
	s.loop.Runner.SetConfig(s.opts.Control.Runner)
	s.loop.Runner.SetMigrationRate(s.opts.Control.Runner.MigrationRate)
}

// SetWorkload changes the workload from now on. The key count may change:
// ranges keep their byte bounds and are mapped onto the new keys.
func (s *Sim) SetWorkload(w Workload) error {
	if err := w.Validate(); err != nil {
		return err
	}
	s.workload = w
	s.dist = newKeyDist(w, s.rng)
	for _, r := range s.ranges {
		r.lo, r.hi = bounds(r.start, r.end, w.Keys)
	}
	s.refreshRanges()
	s.computeLoads()
	s.logf("workload: %s", w)
	return nil
}

// Workload is the workload in effect.
func (s *Sim) Workload() Workload { return s.workload }

// AddNode adds a node. It joins live; the controller puts it in bootstrap
// phase 1 at its next round.
func (s *Sim) AddNode(spec NodeSpec) uint64 {
	id := s.nodes[len(s.nodes)-1].id + 1
	s.nodes = append(s.nodes, s.newNode(id, spec))
	loc := ""
	if spec.Locality != "" {
		loc = " in " + spec.Locality
	}
	s.logf("n%d joined%s", id, loc)
	s.computeLoads()
	return id
}

// KillNode stops a node: it is suspect at once and dead DeadAfter later.
// Its leases move to live voters (elections), and operators adding a
// replica on it fail.
func (s *Sim) KillNode(id uint64) error {
	n := s.node(id)
	if n == nil || n.gone {
		return fmt.Errorf("sim: no node %d", id)
	}
	if !n.up() {
		return fmt.Errorf("sim: node %d is already down (%s)", id, n.state)
	}
	n.state, n.killedAt = placement.NodeSuspect, s.clock.Now()
	s.logf("n%d killed (suspect)", id)
	for _, f := range slices.Clone(s.flights) {
		if f.op.Target == id || f.op.Kind == placement.OpMerge && s.mergeTouches(f, id) {
			s.finish(f, fmt.Errorf("node %d died", id))
		}
	}
	for _, r := range s.ranges {
		if _, ok := r.has(id); ok && (r.lease == id || !s.quorum(r)) {
			s.elect(r) // a new leaseholder, or none without a quorum
		}
	}
	s.computeLoads()
	return nil
}

// quorum reports whether a majority of r's voters is up.
func (s *Sim) quorum(r *rangeState) bool {
	vs, up := r.voters(), 0
	for _, v := range vs {
		if s.up(v) {
			up++
		}
	}
	return up > len(vs)/2
}

// RestartNode brings a killed node back with the replicas the ranges still
// list on it.
func (s *Sim) RestartNode(id uint64) error {
	n := s.node(id)
	if n == nil || n.gone {
		return fmt.Errorf("sim: no node %d", id)
	}
	if n.up() {
		return fmt.Errorf("sim: node %d is up", id)
	}
	was := n.state
	n.state, n.killedAt = placement.NodeLive, time.Time{}
	s.logf("n%d restarted (was %s)", id, was)
	for _, r := range s.ranges {
		if r.lease == 0 {
			s.elect(r)
		}
	}
	s.computeLoads()
	return nil
}

// Decommission starts draining a node: the policy moves its replicas away;
// once it holds none it leaves the cluster.
func (s *Sim) Decommission(id uint64) error {
	n := s.node(id)
	if n == nil || n.gone {
		return fmt.Errorf("sim: no node %d", id)
	}
	if n.state != placement.NodeLive {
		return fmt.Errorf("sim: node %d is %s", id, n.state)
	}
	n.state = placement.NodeDraining
	s.logf("n%d decommissioning (draining)", id)
	return nil
}

// SkewClock marks a node's clock untrusted (its offset monitor would:
// too far from its peers'), or trusted again with untrusted false. The
// node says so in its heartbeat and the control loop moves its leases.
func (s *Sim) SkewClock(id uint64, untrusted bool) error {
	n := s.node(id)
	if n == nil || n.gone {
		return fmt.Errorf("sim: no node %d", id)
	}
	n.clockUntrusted = untrusted
	if untrusted {
		s.logf("n%d clock untrusted", id)
	} else {
		s.logf("n%d clock trusted", id)
	}
	return nil
}

// Recommission stops draining a node: it takes replicas again.
func (s *Sim) Recommission(id uint64) error {
	n := s.node(id)
	if n == nil || n.gone {
		return fmt.Errorf("sim: no node %d", id)
	}
	if n.state != placement.NodeDraining {
		return fmt.Errorf("sim: node %d is %s, not draining", id, n.state)
	}
	n.state = placement.NodeLive
	s.logf("n%d recommissioned", id)
	return nil
}

// GrowData adds bytes at once: to range rangeID, or spread over the ranges
// like writes when rangeID is 0.
func (s *Sim) GrowData(bytes uint64, rangeID uint64) error {
	if rangeID != 0 {
		r := s.byID[rangeID]
		if r == nil {
			return fmt.Errorf("sim: no range %d", rangeID)
		}
		r.bytes += float64(bytes)
	} else {
		for _, r := range s.ranges {
			r.bytes += float64(bytes) * s.dist.share(r.lo, r.hi)
		}
	}
	s.computeLoads()
	return nil
}

// RunFor advances the simulation by d, one tick at a time.
func (s *Sim) RunFor(d time.Duration) {
	end := s.clock.Now().Add(d)
	for s.clock.Now().Before(end) {
		s.tick(min(s.opts.Tick, end.Sub(s.clock.Now())))
	}
}

// tick advances time by dt: liveness, operator progress, workload, then a
// decision when one is due.
func (s *Sim) tick(dt time.Duration) {
	s.clock.Advance(dt)
	now := s.clock.Now()
	if s.curve != nil {
		s.workload.QPS = s.curve(s.clock.Elapsed())
	}
	for _, n := range s.nodes {
		if n.state == placement.NodeSuspect && now.Sub(n.killedAt) >= s.opts.Control.DeadNodeGrace {
			n.state = placement.NodeDead
			s.logf("n%d dead", n.id)
		}
	}
	s.joinStarted()
	s.driftAndSample(dt)
	s.progress(dt)
	s.applyWorkload(dt)
	s.computeLoads()
	s.evict(dt)
	s.retireDrained()
	if !now.Before(s.nextDecide) {
		s.decide()
	}
	if s.curve != nil {
		s.recordElastic()
	}
}

// retireDrained removes draining nodes that hold nothing any more.
func (s *Sim) retireDrained() {
	for _, n := range s.nodes {
		if n.state != placement.NodeDraining || n.gone || n.replicas > 0 {
			continue
		}
		inFlight := false
		for _, f := range s.flights {
			inFlight = inFlight || f.op.Source == n.id || f.op.Target == n.id
		}
		if !inFlight {
			n.gone = true
			s.logf("n%d decommissioned", n.id)
		}
	}
}

// observe is what the model reports to the control loop, as the server
// reports the real cluster: no derived fields, no runner state.
func (s *Sim) observe() control.Observation {
	obs := control.Observation{Now: s.clock.Now(), Signals: map[uint64]control.NodeSignal{}}
	for _, n := range s.nodes {
		if n.gone {
			continue
		}
		pn := placement.Node{ID: n.id, Locality: n.spec.Locality, State: n.state, Bytes: uint64(n.bytes), ClockUntrusted: n.clockUntrusted}
		// CPU and p99 are readings, with this tick's errors.
		cpu, p99 := n.cpu*n.cpuRead, time.Duration(float64(n.p99)*n.p99Read)
		if n.up() {
			pn.QPS, pn.CPU, pn.Score = n.load, cpu, n.score
		}
		obs.Nodes = append(obs.Nodes, pn)
		// With RequestsOnly a node reports the clients' requests it
		// answered and refused, as the server's does: the writes it
		// applies as a follower cost CPU but are no requests. Refusals
		// take requests and follower work alike.
		ops, rejected := n.served, n.rejected
		if s.opts.RequestsOnly && n.load > 0 {
			ops, rejected = n.requests*n.served/n.load, n.requests*n.rejected/n.load
		}
		obs.Signals[n.id] = control.NodeSignal{Addr: fmt.Sprintf("n%d", n.id), P99: p99, Ops: ops,
			ReadShare: s.workload.ReadShare, Rejected: rejected, QueueUtil: clamp(n.util - 1), CPU: cpu}
	}
	for _, r := range s.ranges {
		obs.Ranges = append(obs.Ranges, s.observed(r))
	}
	s.observeCache(&obs)
	return obs
}

// Snapshot is the cluster as reported now, with the control loop's
// bootstrap phases and the runner's operators in flight (without the
// fields the controller derives at its next round).
func (s *Sim) Snapshot() placement.Snapshot {
	obs := s.observe()
	snap := placement.Snapshot{Now: obs.Now, Nodes: obs.Nodes, Ranges: obs.Ranges}
	for i := range snap.Nodes {
		snap.Nodes[i].Phase = s.loop.Controller.Phase(snap.Nodes[i].ID)
	}
	snap.Busy, snap.InFlight = s.loop.Runner.Busy()
	return snap
}

// phase is a node's bootstrap phase, as the control loop knows it.
func (s *Sim) phase(id uint64) placement.Phase { return s.loop.Controller.Phase(id) }

// decide runs one round of the control loop.
func (s *Sim) decide() {
	for !s.nextDecide.After(s.clock.Now()) {
		s.nextDecide = s.nextDecide.Add(s.opts.Control.Interval)
	}
	s.loop.Round(s.observe())
	s.total.Decisions++
	s.computeLoads()
	s.record()
}

var digits = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// simSink logs the control loop's events: policy bugs are counted, notes
// logged once per shape (digits masked), the rest always.
type simSink struct{ s *Sim }

func (k simSink) Event(e control.Event) {
	s := k.s
	switch e.Kind {
	case control.EventPolicyBug:
		s.total.PolicyBugs++
		if key := "bug:" + digits.ReplaceAllString(e.Reason, "#"); !s.seen[key] {
			s.seen[key] = true
			s.logf("policy bug: %s", e.Reason)
		}
	case "placement":
		if key := "note:" + digits.ReplaceAllString(e.Reason, "#"); !s.seen[key] {
			s.seen[key] = true
			s.logf("note: %s", e.Reason)
		}
	case "operator-failed":
		// The executor logs failures with the model's view (ended).
	default:
		s.logf("%s: %s", e.Subject, e.Reason)
	}
}

// LogEntry is something that happened: a node event, a phase change, a
// failed operator, a policy bug, thrash, the first of each kind of note.
type LogEntry struct {
	At   time.Duration
	Text string
}

func (s *Sim) logf(format string, args ...any) {
	s.log = append(s.log, LogEntry{At: s.clock.Elapsed(), Text: fmt.Sprintf(format, args...)})
}

// Log returns everything logged so far.
func (s *Sim) Log() []LogEntry { return slices.Clone(s.log) }

func (e LogEntry) String() string { return fmt.Sprintf("%s %s", fmtDur(e.At), e.Text) }

func fmtDur(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
