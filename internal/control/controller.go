package control

import (
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/placement"
)

// Controller is the soft state of placement: what the policies need to
// remember between rounds. It runs wherever the meta range's lease is;
// a new leaseholder starts a fresh Controller and rebuilds it, because
// every operator is a self-contained change that either happened or
// did not, and the policies finish what an interrupted one left (a
// leftover learner, a frozen range).
//
// A Controller is not safe for concurrent use; Loop serialises it.
type Controller struct {
	cfg         Config
	policy      placement.Config
	decide      func(placement.Snapshot) placement.Plan // nil: placement.Decide
	phases      map[uint64]placement.Phase
	quotas      map[uint64]int
	firstSeen   map[uint64]time.Time     // a range's first sighting: when it split, as far as we know
	replicaSeen map[replicaKey]time.Time // a replica's first sighting as what it is
	hits        map[uint64]float64       // smoothed request rate per range
	readPeaks   map[uint64]*readPeak     // replica reads per range over the last RangeCooldown
	notes       map[string]time.Time     // when a note (digits masked) was last recorded
}

// hitsAlpha smooths range hit rates across rounds.
const hitsAlpha = 0.3

// NewController starts with no memory of the cluster.
func NewController(cfg Config, policy placement.Config) *Controller {
	c := &Controller{cfg: cfg, policy: policy}
	c.Reset()
	return c
}

// Reset forgets everything (the meta lease moved away and back).
func (c *Controller) Reset() {
	c.phases = map[uint64]placement.Phase{}
	c.quotas = map[uint64]int{}
	c.firstSeen = map[uint64]time.Time{}
	c.replicaSeen = map[replicaKey]time.Time{}
	c.hits = map[uint64]float64{}
	c.readPeaks = map[uint64]*readPeak{}
	c.notes = map[string]time.Time{}
}

// SetPolicy changes the placement thresholds from the next round on.
func (c *Controller) SetPolicy(p placement.Config) { c.policy = p }

// SetDecider replaces placement.Decide (nil restores it): the seam the
// simulator's own tests use to script decisions.
func (c *Controller) SetDecider(d func(placement.Snapshot) placement.Plan) { c.decide = d }

// Policy is the placement configuration in force.
func (c *Controller) Policy() placement.Config { return c.policy }

// Phase is a node's bootstrap phase.
func (c *Controller) Phase(node uint64) placement.Phase { return c.phases[node] }

// Decide runs one placement round: it derives the snapshot the policies
// see from the observation (and the runner's busy set and recently
// completed operators, for the policies' cool-downs), asks
// placement.Decide, and moves bootstrapping nodes through their phases.
func (c *Controller) Decide(obs Observation, busy map[uint64]bool, inFlight []placement.Operator, recent []Finished) Decisions {
	snap := c.snapshot(obs, busy, inFlight)
	for _, f := range recent {
		if f.Err == nil {
			snap.Recent = append(snap.Recent, placement.RecentOp{Op: f.Op, At: f.Ended})
		}
	}
	var evs []Event
	if c.advancePhases(snap, &evs) {
		for i := range snap.Nodes {
			snap.Nodes[i].Phase = c.phases[snap.Nodes[i].ID]
		}
	}
	var plan placement.Plan
	if c.decide != nil {
		plan = c.decide(snap)
	} else {
		plan = placement.Decide(snap, c.policy)
	}
	for _, n := range plan.Notes {
		key := digits.ReplaceAllString(n, "#")
		if last, ok := c.notes[key]; !ok || obs.Now.Sub(last) >= c.cfg.NoteEvery {
			c.notes[key] = obs.Now
			evs = append(evs, Event{Kind: "placement", Subject: "cluster", Reason: n})
		}
	}
	return Decisions{Snapshot: snap, Ops: plan.Ops, Events: evs}
}

// replicaReadPeak records the reads the range's other replicas served as
// seen at now and returns the highest over the last RangeCooldown
// (placement.Range.ReplicaReadPeakQPS). What this controller did not see
// (before its first sighting of the range) or could not know (a
// replica's node unreported) counts as +Inf: they may have served any
// amount then.
func (c *Controller) replicaReadPeak(r placement.Range, now time.Time) float64 {
	w := c.readPeaks[r.ID]
	if w == nil {
		w = &readPeak{}
		c.readPeaks[r.ID] = w
		w.observe(now, math.Inf(1), c.policy.RangeCooldown)
	}
	reads := r.ReplicaReadQPS
	if r.ReplicaReadsUnknown {
		reads = math.Inf(1)
	}
	return w.observe(now, reads, c.policy.RangeCooldown)
}

// readPeak holds the rates seen over a sliding window in which each
// outranks every later one, so the first is the window's highest.
type readPeak []readSeen

type readSeen struct {
	at  time.Time
	qps float64
}

// observe adds the rate seen at now, drops what it outranks and what is
// older than window, and returns the window's highest rate.
func (w *readPeak) observe(now time.Time, qps float64, window time.Duration) float64 {
	q := *w
	for len(q) > 0 && q[len(q)-1].qps <= qps {
		q = q[:len(q)-1]
	}
	q = append(q, readSeen{now, qps})
	for now.Sub(q[0].at) >= window && len(q) > 1 {
		q = q[1:]
	}
	*w = q
	return q[0].qps
}

// digits masks the numbers of a note, so a note that differs only in its
// numbers is not recorded again before NoteEvery.
var digits = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// replicaKey names a non-adaptive replica as a voter or a plain learner.
type replicaKey struct {
	rangeID, node uint64
	typ           placement.ReplicaType
}

// snapshot fills what placement derives across rounds.
func (c *Controller) snapshot(obs Observation, busy map[uint64]bool, inFlight []placement.Operator) placement.Snapshot {
	now := obs.Now
	snap := placement.Snapshot{Now: now, Busy: busy, InFlight: inFlight, Boundaries: obs.Boundaries}
	if snap.Busy == nil {
		snap.Busy = map[uint64]bool{}
	}
	seen := map[uint64]bool{}
	seenReplicas := map[replicaKey]bool{}
	for _, r := range obs.Ranges {
		seen[r.ID] = true
		if _, ok := c.firstSeen[r.ID]; !ok {
			c.firstSeen[r.ID] = now
		}
		c.hits[r.ID] = hitsAlpha*r.QPS + (1-hitsAlpha)*c.hits[r.ID]
		r.HitsEWMA, r.SplitAt = c.hits[r.ID], c.firstSeen[r.ID]
		r.ReplicaReadPeakQPS = c.replicaReadPeak(r, now)
		reps := make([]placement.Replica, len(r.Replicas))
		for i, rep := range r.Replicas {
			if !rep.Adaptive {
				key := replicaKey{r.ID, rep.Node, rep.Type}
				seenReplicas[key] = true
				if _, ok := c.replicaSeen[key]; !ok || r.ChangeInProgress {
					// The graces count from when no change was running.
					c.replicaSeen[key] = now
				}
				rep.Since = c.replicaSeen[key]
			}
			reps[i] = rep
		}
		r.Replicas = reps
		snap.Ranges = append(snap.Ranges, r)
	}
	for id := range c.firstSeen {
		if !seen[id] {
			delete(c.firstSeen, id)
			delete(c.hits, id)
			delete(c.readPeaks, id)
		}
	}
	for key := range c.replicaSeen {
		if !seenReplicas[key] {
			delete(c.replicaSeen, key)
		}
	}
	for _, n := range obs.Nodes {
		n.Phase = c.phases[n.ID]
		snap.Nodes = append(snap.Nodes, n)
	}
	return snap
}

// advancePhases moves nodes through the two bootstrap phases: an empty
// live node (in a cluster with data elsewhere) enters phase 1 with a quota;
// at the quota it enters phase 2; once balanced it is an ordinary node. It
// reports whether any phase changed.
func (c *Controller) advancePhases(snap placement.Snapshot, evs *[]Event) bool {
	counts := map[uint64]int{}
	total := 0
	for _, r := range snap.Ranges {
		for _, rep := range r.Replicas {
			counts[rep.Node]++
			total++
		}
	}
	live := 0
	for _, n := range snap.Nodes {
		if n.State == placement.NodeLive {
			live++
		}
	}
	changed := false
	for _, n := range snap.Nodes {
		phase, known := c.phases[n.ID]
		quota := c.quotas[n.ID]
		next := phase
		switch {
		case n.State != placement.NodeLive && !known:
			continue // decide once it is live (a joining node is not yet)
		case n.State != placement.NodeLive:
			next = placement.PhaseNone
		case !known && counts[n.ID] == 0 && total > 0:
			next = placement.PhaseOne
			quota = placement.BootstrapQuota(snap, c.policy)
		case !known && counts[n.ID]*live < total && !placement.Balanced(snap, n.ID, c.policy):
			// A node below its share when this controller first sees it
			// was bootstrapping under the previous meta leaseholder (or
			// lost replicas since): it carries on pulling in phase 2.
			next = placement.PhaseTwo
		case phase == placement.PhaseOne && counts[n.ID] >= quota:
			next = placement.PhaseTwo
		case phase == placement.PhaseTwo && placement.Balanced(snap, n.ID, c.policy):
			next = placement.PhaseNone
		}
		c.phases[n.ID], c.quotas[n.ID] = next, quota
		if next == phase && (known || next == placement.PhaseNone) {
			continue
		}
		changed = changed || next != phase
		if n.State != placement.NodeLive && phase == placement.PhaseNone {
			continue
		}
		what := "bootstrap done: balanced"
		switch next {
		case placement.PhaseOne:
			what = fmt.Sprintf("bootstrap phase 1: takes %d replicas and their leases from the busiest nodes", quota)
		case placement.PhaseTwo:
			what = fmt.Sprintf("bootstrap phase 2: holds %d replicas; pulls more, throttled, until balanced", counts[n.ID])
		}
		*evs = append(*evs, Event{Kind: "bootstrap", Subject: events.NodeSubject(n.ID), Reason: what})
	}
	return changed
}
