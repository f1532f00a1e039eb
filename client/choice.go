package client

import (
	"math"
	"sync/atomic"
	"time"
)

// Replica choice for BOUNDED and ANY reads (docs/read-modes.md).
//
// Each replica costs score + RTTWeight·rtt/1ms: score is the node's load
// score from Admin.NodeLoads, polled in the background; rtt is this
// client's moving average of its round trips to the node. Replicas that
// recently failed, look hung, or refused this range's bound as stale are
// left out. The cheapest remaining replica wins; near-equal ones share the
// load at random.

// readTuning holds the timing constants of replica choice, in one place so
// that tests can shorten them.
type readTuning struct {
	pollInterval time.Duration // NodeLoads period
	pollTimeout  time.Duration // bound on one NodeLoads call
	maxLoadAge   time.Duration // older load samples are stale
	penaltyBase  time.Duration // exclusion after one failure
	penaltyMax   time.Duration // cap as consecutive failures double it
	stallAfter   time.Duration // busy without any reply this long: hung
	staleHintFor time.Duration // how long a STALE_REPLICA answer is remembered
	rttMaxAge    time.Duration // a round trip older than this is forgotten
}

func defaultReadTuning() readTuning {
	return readTuning{
		pollInterval: 500 * time.Millisecond,
		pollTimeout:  time.Second,
		maxLoadAge:   3 * time.Second,
		penaltyBase:  time.Second,
		penaltyMax:   4 * time.Second,
		stallAfter:   time.Second,
		staleHintFor: time.Second,
		rttMaxAge:    3 * time.Second,
	}
}

// Replicas whose costs are within tieScore points of the cheapest, and
// whose round trips are within tieRTTMs of the nearest of those, are equal:
// measured costs never tie exactly, and without a band every client would
// pile onto whichever replica is a hair cheaper until the next poll.
const (
	tieScore = 0.5
	tieRTTMs = 0.5
)

// replicaRef is one replica of a cached range resolved to its address and
// stats. refs are parallel to the descriptor's replicas; peer is nil for a
// replica whose node address is unknown.
type replicaRef struct {
	id   uint64
	addr string
	peer *peerStats
}

// replicaSet caches a range's resolved replicas for one version of the
// node address table.
type replicaSet struct {
	nodesGen uint64
	refs     []replicaRef
}

// staleHint remembers that a replica refused a read of its range, so that
// reads it would refuse again skip it for a while: STALE_REPLICA refuses
// bounded reads with the same or a tighter bound; RANGE_NOT_FOUND (no
// replica there after all) refuses every read, recorded as anyBound. The
// two fields race benignly: it is a hint.
type staleHint struct {
	until atomic.Int64 // mono ns
	bound atomic.Int64 // the refused bound, ns
}

// anyBound is the staleness bound of an ANY read for staleHint: looser than
// any BOUNDED read, so only "refuses everything" hints apply to it.
const anyBound = time.Duration(math.MaxInt64)

func (h *staleHint) set(now int64, forDur, bound time.Duration) {
	h.bound.Store(int64(bound))
	h.until.Store(now + int64(forDur))
}

func (h *staleHint) applies(now int64, bound time.Duration) bool {
	return now < h.until.Load() && int64(bound) <= h.bound.Load()
}

// replicasOf returns e's replicas resolved against s's node table, cached in
// e until the table changes.
func (c *Client) replicasOf(s *snapshot, e *rangeEntry) []replicaRef {
	if rs := e.reps.Load(); rs != nil && rs.nodesGen == s.nodesGen {
		return rs.refs
	}
	reps := e.desc.GetReplicas()
	refs := make([]replicaRef, len(reps))
	for i, rd := range reps {
		if a := s.nodes[rd.GetNodeId()]; a != "" {
			refs[i] = replicaRef{id: rd.GetNodeId(), addr: a, peer: c.peer(a)}
		}
	}
	e.reps.Store(&replicaSet{nodesGen: s.nodesGen, refs: refs})
	return refs
}

// pickInput is everything chooseReplica looks at.
type pickInput struct {
	refs       []replicaRef
	stale      []staleHint // parallel to refs; may be shorter or nil
	loads      *loadView
	rttWeight  float64
	bound      time.Duration // a BOUNDED read's bound; anyBound for ANY
	now        int64         // mono ns
	stallAfter int64         // ns
	rttMaxAge  int64         // ns; 0 keeps every round trip
	rnd        uint64        // random bits for breaking ties
	skip       uint64        // bit i: refs[i] already tried by this request
}

// chooseReplica returns the index in refs of the replica to try next, or -1
// when none is eligible (all tried, unresolved, penalised, hung, or known to
// refuse this read). It is pure: it reads only its input (and the
// atomics of the peers it names), no clock, no shared state.
//
// The cheapest eligible replica by score + rttWeight·rtt/1ms wins. Replicas
// within tieScore of it tie; among those, the ones within tieRTTMs of the
// nearest remain, and rnd picks one of them, so equal replicas share the load.
// A replica never measured counts rtt 0, so each gets tried and measured;
// so does one whose last reply is older than rttMaxAge while nothing is in
// flight to it (one probe at a time): one slow round trip must not keep a
// replica unchosen, and so unmeasured, for good.
func chooseReplica(in *pickInput) int {
	type cand struct {
		i         int
		cost, rtt float64
	}
	var buf [8]cand
	cs := buf[:0]
	loads := in.loads
	if loads == nil {
		loads = emptyLoadView
	}
	best := math.Inf(1)
	for i := range in.refs {
		r := &in.refs[i]
		if r.peer == nil || (i < 64 && in.skip&(1<<uint(i)) != 0) || r.peer.excluded(in.now, in.stallAfter) {
			continue
		}
		if i < len(in.stale) && in.stale[i].applies(in.now, in.bound) {
			continue
		}
		rtt := float64(r.peer.rtt.Load()) / float64(time.Millisecond)
		if last := r.peer.lastReply.Load(); in.rttMaxAge > 0 && last != 0 && in.now-last > in.rttMaxAge && r.peer.inflight.Load() == 0 {
			rtt = 0 // one probe at a time: the rest wait for its answer
		}
		cost := loads.score(r.id) + in.rttWeight*rtt
		cs = append(cs, cand{i, cost, rtt})
		best = min(best, cost)
	}
	if len(cs) == 0 {
		return -1
	}
	nearest := math.Inf(1)
	for _, c := range cs {
		if c.cost <= best+tieScore {
			nearest = min(nearest, c.rtt)
		}
	}
	n := 0
	for _, c := range cs {
		if c.cost <= best+tieScore && c.rtt <= nearest+tieRTTMs {
			cs[n] = c
			n++
		}
	}
	// Lemire's multiply-shift: a uniform index without a division.
	return cs[((in.rnd>>32)*uint64(n))>>32].i
}
