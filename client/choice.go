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
// client's quickest round trip to the node in the last one to two seconds
// (peerStats.near), aged toward the nearest replica's while it is not
// refreshed. The quickest, not the average: it says how far the node is,
// the score and the requests in flight say how busy; a pause at the node
// slows every reply in flight, and by the average it left the choice for
// seconds after it ended. Replicas that recently
// failed, look hung, or refused this range's bound as stale are left out,
// and those at a shedding node's in-flight window while others are not. The replicas
// whose cost is within the noise of the cheapest take turns, a replica
// yielding its turn to the next when that one has fewer of this client's
// requests in flight. Now and then a replica that has been sent nothing
// for a while gets a read, so that what is known of it does not go stale.

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
	// rttHalfLife: a round-trip average not refreshed for this long counts
	// half as much, in the choice (against the nearest replica's) and
	// against the next sample.
	rttHalfLife time.Duration
	// probeAfter: a replica sent no request for this long may be probed.
	probeAfter time.Duration
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
		rttHalfLife:  time.Second,
		probeAfter:   time.Second,
	}
}

// The noise band: a replica ties with the cheapest when its cost is within
// tieScore + tieNoise·(its noise + the cheapest's noise)
// + RTTWeight·(tieRTTShare·nearest + tieRTTMs) of it, nearest being the
// smallest round trip among the candidates (ms) and noise a score's mean
// deviation (scoreTrack). Measured costs never tie exactly: round trips on
// a busy machine jitter by about their own size, and a node's score by
// whatever was in flight when it was sampled; without a band every client
// would pile onto whichever replica is a hair cheaper, or sampled idle.
const (
	tieScore    = 0.5
	tieNoise    = 1.0
	tieRTTShare = 0.5
	tieRTTMs    = 0.5
)

// How fast a node's smoothed score follows its samples (scoreTrack), per
// sample (a node's monitor samples once a second): the mean moves a
// quarter of the way, so one odd sample moves it by a quarter while a node
// saturated at every sample leaves the choice after two to seven samples
// (the more the others' samples swing, the later); the noise follows as
// fast, as TCP's round-trip variation does.
const (
	scoreGain = 0.25
	noiseGain = 0.25
)

// probeOneIn: every probeOneIn-th read of a range may probe a due replica,
// so that probes are at most this share of a slow client's reads and
// follow within a few reads at a busy one.
const probeOneIn = 16

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
	refs        []replicaRef
	stale       []staleHint // parallel to refs; may be shorter or nil
	loads       *loadView
	rttWeight   float64
	bound       time.Duration // a BOUNDED read's bound; anyBound for ANY
	now         int64         // mono ns
	stallAfter  int64         // ns
	rttHalfLife int64         // ns; 0: round trips do not age
	probeAfter  int64         // ns; 0: no probes
	turn        uint64        // the range's count of relaxed read attempts: equals take turns
	skip        uint64        // bit i: refs[i] already tried by this request
}

// candidate is an eligible replica as chooseReplica weighs it.
type candidate struct {
	i        int32
	inflight int32
	full     bool // at a shedding node's window
	refused  bool // the node refused a request as overloaded lately
	score    float64
	noise    float64 // the score's mean deviation
	measured int64   // the rtt as measured, ns; 0 if never
	at       int64   // mono ns when it was measured
	sent     int64   // mono ns of the last request sent
	cost     float64
}

// chooseReplica returns the index in refs of the replica to try next, or -1
// when none is eligible (all tried, unresolved, penalised, hung, or known
// to refuse this read). Replicas at a shedding node's in-flight window are
// chosen only when every eligible one is. It is pure: it reads
// only its input (and the atomics of the peers it names), no clock, no
// shared state.
//
//   - Each costs score + rttWeight·rtt/1ms, where a round trip not
//     refreshed for a while moves toward the nearest replica's, halving
//     the difference every rttHalfLife, and a replica never measured counts
//     as the nearest: an old measurement is neither trusted for long nor
//     shunned for good.
//   - Probes, one at a time per replica (nothing in flight to it), and
//     only to a replica whose score would tie at the nearest round trip: a
//     replica never measured, else, every probeOneIn-th turn, the one sent
//     nothing for the longest if that is over probeAfter. A replica that
//     slow replies pushed out of the choice is measured again within about
//     probeAfter at a busy client.
//   - Otherwise the replicas within the noise band of the cheapest are
//     equal, and take turns (turn modulo their number); the one whose turn
//     it is yields to the next if that one has fewer of this client's
//     requests in flight. Equal replicas with equal queues thus share the
//     reads exactly as round robin would, with arrivals evenly spaced
//     (random picks bunch them, which a node with few slots pays for in
//     refusals); a replica that slows down holds its requests longer and
//     so gets fewer new ones. The counts are this client's own, so the
//     choice does not herd as choosing by shared, periodically polled
//     figures would. Reads chosen at the same instant get successive
//     turns, so they spread rather than all going to the one emptiest
//     replica.
func chooseReplica(in *pickInput) int {
	var buf [8]candidate
	cs, nearest := gatherCandidates(in, buf[:0])
	if len(cs) == 0 {
		return -1
	}
	nearestMs := float64(nearest) / float64(time.Millisecond)
	base := priceCandidates(in, cs, nearest, nearestMs)
	if k := probeCandidate(in, cs, nearestMs, base); k >= 0 {
		return k
	}
	n := 0
	for k := range cs {
		if cs[k].cost <= cs[k].limit(base) {
			cs[n].i, cs[n].inflight, cs[n].refused = cs[k].i, cs[k].inflight, cs[k].refused // n never passes k
			n++
		}
	}
	// The equals take turns; the one whose turn it is yields to the next
	// if that one is readier.
	a := int(in.turn % uint64(n))
	if b := (a + 1) % n; cs[b].readier(&cs[a]) {
		a = b
	}
	return int(cs[a].i)
}

// readier reports whether c should take o's turn: it has fewer of this
// client's requests in flight and did not refuse one as overloaded lately.
// A refusal comes back fast, so by in-flight counts alone a refusing node
// looks the emptiest and takes its neighbour's turns, to refuse those too;
// it keeps its own turns, as with round robin.
func (c *candidate) readier(o *candidate) bool {
	return !c.refused && c.inflight < o.inflight
}

// limit is the costliest c may be and still tie with the cheapest, base
// being the band around the cheapest without c's own noise.
func (c *candidate) limit(base float64) float64 { return base + tieNoise*c.noise }

// gatherCandidates appends to cs the replicas that may take the read, and
// returns them with the nearest measured round trip among them (0 if none
// was measured). Replicas at a shedding node's window are kept only when
// all are.
func gatherCandidates(in *pickInput, cs []candidate) ([]candidate, int64) {
	loads := in.loads
	if loads == nil {
		loads = emptyLoadView
	}
	nearest, nearestOpen, open := int64(math.MaxInt64), int64(math.MaxInt64), 0
	for i := range in.refs {
		r := &in.refs[i]
		p := r.peer
		if p == nil || (i < 64 && in.skip&(1<<uint(i)) != 0) {
			continue
		}
		inflight, full, ok := p.usable(in.now, in.stallAfter)
		if !ok || (i < len(in.stale) && in.stale[i].applies(in.now, in.bound)) {
			continue
		}
		// Filled in place: a candidate is copied only to drop the costlier.
		cs = cs[:len(cs)+1]
		c := &cs[len(cs)-1]
		ns := loads.score(r.id)
		c.i, c.inflight, c.full, c.score, c.noise = int32(i), inflight, full, ns.score, ns.noise
		c.refused = p.refusedLately(in.now)
		c.measured, c.at, c.sent = p.near.get(), p.rttAt.Load(), p.lastSent.Load()
		if c.measured != 0 {
			nearest = min(nearest, c.measured)
		}
		if !full {
			open++
			if c.measured != 0 {
				nearestOpen = min(nearestOpen, c.measured)
			}
		}
	}
	if open > 0 && open < len(cs) {
		n := 0
		for k := range cs {
			if !cs[k].full {
				cs[n] = cs[k]
				n++
			}
		}
		cs, nearest = cs[:n], nearestOpen
	}
	if nearest == math.MaxInt64 {
		nearest = 0 // nothing measured yet
	}
	return cs, nearest
}

// priceCandidates sets each candidate's cost and returns the tie band's
// base: the cheapest cost plus the noise allowances.
func priceCandidates(in *pickInput, cs []candidate, nearest int64, nearestMs float64) float64 {
	best, bestNoise := math.Inf(1), 0.0
	for k := range cs {
		c := &cs[k]
		rtt := nearest
		if c.measured != 0 {
			rtt = decayToward(c.measured, nearest, in.now-c.at, in.rttHalfLife)
		}
		c.cost = c.score + in.rttWeight*float64(rtt)/float64(time.Millisecond)
		if c.cost < best { // not min: it checks for NaN, and costs are finite
			best, bestNoise = c.cost, c.noise
		}
	}
	return best + tieScore + tieNoise*bestNoise + in.rttWeight*(tieRTTShare*nearestMs+tieRTTMs)
}

// probeCandidate returns the index in refs of a replica to probe, or -1: a
// replica never measured first, else, now and then, the one sent nothing
// for longest. Only a replica whose score would tie at the nearest round
// trip is worth measuring: the scores are polled anyway.
func probeCandidate(in *pickInput, cs []candidate, nearestMs, base float64) int {
	probe := -1
	for k := range cs {
		c := &cs[k]
		if c.inflight != 0 || c.score+in.rttWeight*nearestMs > c.limit(base) {
			continue
		}
		switch {
		case c.measured == 0:
			return int(c.i)
		case in.probeAfter > 0 && in.turn%probeOneIn == 0 && in.now-c.sent > in.probeAfter && (probe < 0 || c.sent < cs[probe].sent):
			probe = k
		}
	}
	if probe >= 0 {
		return int(cs[probe].i)
	}
	return -1
}

// decayToward moves v toward target by half the difference for every
// halfLife of age (not at all with halfLife 0). Ages under a sixteenth of
// the half-life, the common case under load, skip the exponential.
func decayToward(v, target, age, halfLife int64) int64 {
	if halfLife <= 0 || age < halfLife/16 || v == target {
		return v
	}
	return target + int64(float64(v-target)*math.Exp2(-float64(age)/float64(halfLife)))
}
