package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/placement"
)

// The placement controller runs on the meta range's leaseholder. Every
// PlacementInterval it builds a placement.Snapshot from the range directory,
// the range reports and the node heartbeats, asks placement.Decide what to
// do, and hands the operators to the runner (runner.go), which executes
// them with rate limits. Its own state (bootstrap phases, first sightings
// of ranges, smoothed hit rates) is soft: a new leaseholder rebuilds it,
// and every operator is a self-contained admin call, so nothing is left
// half done when the controller's node dies — a leftover learner from an
// interrupted addition is finished by the replication policy.

// controller is the leaseholder-only state of placement.
type controller struct {
	mu        sync.Mutex
	phases    map[uint64]placement.Phase
	quotas    map[uint64]int
	firstSeen map[uint64]time.Time    // a range's first sighting: when it split, as far as we know
	learners  map[[2]uint64]time.Time // a plain learner's first sighting, by {range, node}
	hits      map[uint64]float64      // smoothed request rate per range
	notes     map[string]time.Time    // when a note was last recorded as an event
}

func newController() *controller {
	c := &controller{}
	c.reset()
	return c
}

func (c *controller) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.phases = map[uint64]placement.Phase{}
	c.quotas = map[uint64]int{}
	c.firstSeen = map[uint64]time.Time{}
	c.learners = map[[2]uint64]time.Time{}
	c.hits = map[uint64]float64{}
	c.notes = map[string]time.Time{}
}

// hitsAlpha smooths range hit rates across placement rounds.
const hitsAlpha = 0.3

// noteEvery is how often the same placement note is recorded as an event.
const noteEvery = 5 * time.Minute

// place runs one placement round if this node holds the meta lease.
func (s *Server) place(ctx context.Context) {
	meta := s.metaLeader()
	if meta == nil || s.liveNodes() == nil {
		return // not leaseholder, or liveness still being learnt
	}
	resp, err := s.rangesLocal(ctx, meta)
	if err != nil {
		return
	}
	now := time.Now()
	cfg := s.placementConfig()
	snap := s.snapshotForPlacement(meta.Desc(), resp, now)
	plan := placement.Decide(snap, cfg)
	s.ctl.mu.Lock()
	for _, n := range plan.Notes {
		if last, ok := s.ctl.notes[n]; !ok || now.Sub(last) >= noteEvery {
			s.ctl.notes[n] = now
			s.events.Record("placement", "cluster", "%s", n)
		}
	}
	s.ctl.mu.Unlock()
	s.advancePhases(snap, cfg)
	for _, op := range plan.Ops {
		s.runner.start(op)
	}
}

// snapshotForPlacement assembles what the policies look at.
func (s *Server) snapshotForPlacement(metaDesc *tidekvpb.RangeDescriptor, resp *tidekvpb.RangesResponse, now time.Time) placement.Snapshot {
	snap := placement.Snapshot{Now: now}
	snap.Busy, snap.InFlight = s.runner.busy()
	ranges := append([]*tidekvpb.RangeInfo{{Desc: metaDesc, LeaderNodeId: s.nodeID}}, resp.GetRanges()...)
	c := s.ctl
	c.mu.Lock()
	seen := map[uint64]bool{}
	seenLearners := map[[2]uint64]bool{}
	for _, ri := range ranges {
		d := ri.GetDesc()
		id := d.GetRangeId()
		seen[id] = true
		if _, ok := c.firstSeen[id]; !ok {
			c.firstSeen[id] = now
		}
		c.hits[id] = hitsAlpha*ri.GetQps() + (1-hitsAlpha)*c.hits[id]
		r := placement.Range{ID: id, Start: d.GetStartKey(), End: d.GetEndKey(), Leaseholder: ri.GetLeaderNodeId(),
			Bytes: ri.GetBytes(), QPS: ri.GetQps(), ReadQPS: ri.GetReadQps(), HitsEWMA: c.hits[id],
			SplitAt: c.firstSeen[id], HotKeyShare: ri.GetHotKeyShare(), MergingInto: d.GetMergingInto()}
		if id == keys.MetaRangeID {
			// The meta range lives in its own key space: never split or
			// merged, only replicated and balanced.
			r.Start, r.End, r.Bytes, r.QPS, r.ReadQPS = nil, nil, 0, 0, 0
		}
		for _, rd := range d.GetReplicas() {
			t := placement.Voter
			if rd.GetType() == tidekvpb.ReplicaType_LEARNER {
				t = placement.Learner
			}
			rep := placement.Replica{Node: rd.GetNodeId(), Type: t, Adaptive: rd.GetAdaptive()}
			if t == placement.Learner && !rep.Adaptive {
				key := [2]uint64{id, rep.Node}
				seenLearners[key] = true
				if _, ok := c.learners[key]; !ok {
					c.learners[key] = now
				}
				rep.Since = c.learners[key]
			}
			r.Replicas = append(r.Replicas, rep)
		}
		snap.Ranges = append(snap.Ranges, r)
	}
	for id := range c.firstSeen {
		if !seen[id] {
			delete(c.firstSeen, id)
			delete(c.hits, id)
		}
	}
	for key := range c.learners {
		if !seenLearners[key] {
			delete(c.learners, key)
		}
	}
	c.mu.Unlock()
	for _, ns := range s.nodeStatuses(resp.GetNodes(), now) {
		n := ns.GetNode()
		snap.Nodes = append(snap.Nodes, placement.Node{ID: n.GetNodeId(), Locality: n.GetLocality(),
			State: s.placementState(ns), Phase: s.phaseOf(n.GetNodeId()),
			Bytes: ns.GetBytes(), QPS: ns.GetQps(), CPU: ns.GetCpu(), Score: ns.GetScore()})
	}
	return snap
}

// placementState maps a node's status to what placement acts on.
func (s *Server) placementState(ns *tidekvpb.NodeStatus) placement.NodeState {
	switch ns.GetState() {
	case stateDead:
		return placement.NodeDead
	case stateDraining, stateDrained:
		return placement.NodeDraining
	case stateSuspect, stateUnknown:
		return placement.NodeSuspect
	}
	return placement.NodeLive
}

// phaseOf returns a node's bootstrap phase (advancePhases sets it).
func (s *Server) phaseOf(node uint64) placement.Phase {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	return s.ctl.phases[node]
}

// advancePhases moves nodes through the two bootstrap phases: an empty
// live node (in a cluster with data elsewhere) enters phase 1 with a quota;
// at the quota it enters phase 2; once balanced it is an ordinary node.
func (s *Server) advancePhases(snap placement.Snapshot, cfg placement.Config) {
	counts := map[uint64]int{}
	total := 0
	for _, r := range snap.Ranges {
		for _, rep := range r.Replicas {
			counts[rep.Node]++
			total++
		}
	}
	c := s.ctl
	for _, n := range snap.Nodes {
		c.mu.Lock()
		phase, known := c.phases[n.ID]
		quota := c.quotas[n.ID]
		c.mu.Unlock()
		next := phase
		switch {
		case n.State != placement.NodeLive && !known:
			continue // decide once it is live (a joining node is not yet)
		case n.State != placement.NodeLive:
			next = placement.PhaseNone
		case !known && counts[n.ID] == 0 && total > 0:
			next = placement.PhaseOne
			quota = placement.BootstrapQuota(snap, cfg)
		case phase == placement.PhaseOne && counts[n.ID] >= quota:
			next = placement.PhaseTwo
		case phase == placement.PhaseTwo && placement.Balanced(snap, n.ID, cfg):
			next = placement.PhaseNone
		}
		c.mu.Lock()
		c.phases[n.ID], c.quotas[n.ID] = next, quota
		c.mu.Unlock()
		if next != phase || !known && next != placement.PhaseNone {
			what := "bootstrap done: balanced"
			switch next {
			case placement.PhaseOne:
				what = fmt.Sprintf("bootstrap phase 1: takes %d replicas and their leases from the busiest nodes", quota)
			case placement.PhaseTwo:
				what = fmt.Sprintf("bootstrap phase 2: holds %d replicas; pulls more, throttled, until balanced", counts[n.ID])
			}
			if n.State == placement.NodeLive || phase != placement.PhaseNone {
				s.events.Record("bootstrap", nodeSubject(n.ID), "%s", what)
			}
		}
	}
}
