package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
)

// Sim is one simulated cluster. It is not safe for concurrent use.
type Sim struct {
	opts     Options
	clock    *Clock
	rng      *rand.Rand
	policy   Policy
	rf       int
	workload Workload
	dist     *keyDist

	nodes       []*node // by ID
	ranges      []*rangeState
	byID        map[uint64]*rangeState
	lastRangeID uint64

	flights []*flight          // in start order
	busy    map[uint64]*flight // by range (both ranges of a merge)
	starts  []time.Time        // operator starts within the last minute

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
	if p.Decide == nil {
		return nil, fmt.Errorf("sim: policy %q has no Decide", p.Name)
	}
	s := &Sim{
		opts:     o,
		clock:    NewClock(),
		rng:      rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		policy:   p,
		rf:       c.RF,
		workload: w,
		byID:     map[uint64]*rangeState{},
		busy:     map[uint64]*flight{},
		seen:     map[string]bool{},
	}
	if p.ReplicationFactor > 0 {
		s.rf = p.ReplicationFactor
	}
	s.dist = newKeyDist(w, s.rng)
	if err := s.newCluster(c); err != nil {
		return nil, err
	}
	s.thrash.init()
	s.nextDecide = Epoch.Add(o.DecideEvery)
	s.refreshRanges()
	s.computeLoads()
	return s, nil
}

// Now is the virtual time since the simulation started.
func (s *Sim) Now() time.Duration { return s.clock.Elapsed() }

// SetPolicy replaces the policy (a configuration change).
func (s *Sim) SetPolicy(p Policy) error {
	if p.Decide == nil {
		return fmt.Errorf("sim: policy %q has no Decide", p.Name)
	}
	s.policy = p
	if p.ReplicationFactor > 0 {
		s.rf = p.ReplicationFactor
	}
	return nil
}

// Options returns the options in effect.
func (s *Sim) Options() Options { return s.opts }

// SetOptions changes the options from now on (zero fields take defaults;
// the seed only matters at New).
func (s *Sim) SetOptions(o Options) { s.opts = o.withDefaults() }

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

// AddNode adds a node. It joins live in bootstrap phase 1.
func (s *Sim) AddNode(spec NodeSpec) uint64 {
	id := s.nodes[len(s.nodes)-1].id + 1
	s.nodes = append(s.nodes, &node{id: id, spec: spec.withDefaults(), phase: placement.PhaseOne})
	loc := ""
	if spec.Locality != "" {
		loc = " in " + spec.Locality
	}
	s.logf("n%d joined%s (bootstrap phase 1)", id, loc)
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
	// The controller forgets a bootstrap phase once the node is not live.
	n.state, n.killedAt, n.phase = placement.NodeSuspect, s.clock.Now(), placement.PhaseNone
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
	n.state, n.phase = placement.NodeDraining, placement.PhaseNone
	s.logf("n%d decommissioning (draining)", id)
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
	for _, n := range s.nodes {
		if n.state == placement.NodeSuspect && now.Sub(n.killedAt) >= s.opts.DeadAfter {
			n.state = placement.NodeDead
			s.logf("n%d dead", n.id)
		}
	}
	s.progress(dt)
	s.applyWorkload(dt)
	s.computeLoads()
	s.retireDrained()
	if !now.Before(s.nextDecide) {
		s.decide()
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

// Snapshot is what the policy would see now.
func (s *Sim) Snapshot() placement.Snapshot {
	snap := placement.Snapshot{Now: s.clock.Now(), Busy: map[uint64]bool{}, Recent: s.recent()}
	for _, n := range s.nodes {
		if n.gone {
			continue
		}
		pn := placement.Node{ID: n.id, Locality: n.spec.Locality, State: n.state, Phase: n.phase, Bytes: uint64(n.bytes)}
		if n.up() {
			pn.QPS, pn.CPU, pn.Score = n.load, n.cpu, n.score
		}
		snap.Nodes = append(snap.Nodes, pn)
	}
	for _, r := range s.ranges {
		snap.Ranges = append(snap.Ranges, s.observed(r))
	}
	seen := map[*flight]bool{}
	for id, f := range s.busy {
		snap.Busy[id] = true
		if !seen[f] { // a merge's flight is listed under both ranges
			seen[f] = true
			snap.InFlight = append(snap.InFlight, f.op)
		}
	}
	slices.SortFunc(snap.InFlight, func(a, b placement.Operator) int { return cmp.Compare(a.Range, b.Range) })
	return snap
}

// decide runs the policy once and starts what it returns.
func (s *Sim) decide() {
	for !s.nextDecide.After(s.clock.Now()) {
		s.nextDecide = s.nextDecide.Add(s.opts.DecideEvery)
	}
	snap := s.Snapshot()
	if s.updatePhases(snap) {
		snap = s.Snapshot()
	}
	plan := s.policy.Decide(snap)
	s.total.Decisions++
	for _, note := range plan.Notes {
		if key := "note:" + digits.ReplaceAllString(note, "#"); !s.seen[key] {
			s.seen[key] = true
			s.logf("note: %s", note)
		}
	}
	s.execute(plan.Ops)
	s.computeLoads()
	s.record()
}

var digits = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// updatePhases moves bootstrapping nodes through their phases; it reports
// whether any changed.
func (s *Sim) updatePhases(snap placement.Snapshot) bool {
	changed := false
	mean := s.meanReplicas()
	for _, n := range s.nodes {
		if n.state != placement.NodeLive || n.gone {
			continue
		}
		switch n.phase {
		case placement.PhaseOne:
			quota := n.quota
			if s.policy.Quota != nil {
				if quota == 0 {
					n.quota = s.policy.Quota(snap, n.id)
					quota = n.quota
				}
			} else {
				quota = max(1, int(math.Ceil(s.opts.BootstrapShare*mean)))
			}
			if n.replicas >= quota {
				n.phase, changed = placement.PhaseTwo, true
				s.logf("n%d bootstrap phase 2 (%d replicas, quota %d)", n.id, n.replicas, quota)
			}
		case placement.PhaseTwo:
			var done bool
			if s.policy.Balanced != nil {
				done = s.policy.Balanced(snap, n.id)
			} else {
				done = math.Abs(float64(n.replicas)-mean) <= math.Max(1, 0.05*mean)
			}
			if done {
				n.phase, changed = placement.PhaseNone, true
				s.logf("n%d bootstrapped (%d replicas, mean %.1f)", n.id, n.replicas, mean)
			}
		}
	}
	return changed
}

// meanReplicas over live nodes.
func (s *Sim) meanReplicas() float64 {
	sum, k := 0, 0
	for _, n := range s.nodes {
		if n.state == placement.NodeLive && !n.gone {
			sum += n.replicas
			k++
		}
	}
	if k == 0 {
		return 0
	}
	return float64(sum) / float64(k)
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
