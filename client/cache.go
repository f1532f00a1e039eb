package client

import (
	"bytes"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// rangeEntry is one cached range. desc is immutable; the leaseholder hint is
// an atomic so that redirects update it in place, without copying the
// snapshot that holds the entry.
type rangeEntry struct {
	desc   *tidekvpb.RangeDescriptor
	leader atomic.Uint64 // node id of the presumed leaseholder; 0 if unknown
	// For BOUNDED and ANY reads: the replicas resolved to addresses, and per
	// replica (parallel to desc.Replicas) what it recently refused.
	reps  atomic.Pointer[replicaSet]
	stale []staleHint
	turn  atomic.Uint64 // relaxed read attempts so far: equal replicas take turns
}

func newEntry(desc *tidekvpb.RangeDescriptor, leader uint64) *rangeEntry {
	e := &rangeEntry{desc: desc, stale: make([]staleHint, len(desc.GetReplicas()))}
	e.leader.Store(leader)
	return e
}

func (e *rangeEntry) contains(key []byte) bool {
	return bytes.Compare(key, e.desc.GetStartKey()) >= 0 &&
		(len(e.desc.GetEndKey()) == 0 || bytes.Compare(key, e.desc.GetEndKey()) < 0)
}

func (e *rangeEntry) containsAll(keys [][]byte) bool {
	for _, k := range keys {
		if !e.contains(k) {
			return false
		}
	}
	return true
}

// holds reports whether r's keys and the ends of its spans lie in e.
func (e *rangeEntry) holds(r *rpc) bool {
	if r.span != nil && !e.containsAll(r.span) {
		return false
	}
	dend := e.desc.GetEndKey()
	for _, end := range r.spanEnds {
		if len(dend) > 0 && (len(end) == 0 || bytes.Compare(end, dend) > 0) {
			return false
		}
	}
	return true
}

// overlaps reports whether the spans of a and b intersect; an empty end key
// is +infinity.
func overlaps(a, b *tidekvpb.RangeDescriptor) bool {
	aBeforeBEnd := len(b.GetEndKey()) == 0 || bytes.Compare(a.GetStartKey(), b.GetEndKey()) < 0
	bBeforeAEnd := len(a.GetEndKey()) == 0 || bytes.Compare(b.GetStartKey(), a.GetEndKey()) < 0
	return aBeforeBEnd && bBeforeAEnd
}

// snapshot is an immutable view of the range map. Writers build a new one and
// swap the pointer; readers never lock.
type snapshot struct {
	ranges []*rangeEntry     // sorted by start key
	nodes  map[uint64]string // node id -> gRPC address
	addrs  []string          // seeds, then known node addresses: targets for "any node" requests
	epoch  uint64            // number of full refreshes this snapshot descends from
	// nodesGen changes whenever nodes does, so that entries can tell whether
	// their resolved replica addresses are current.
	nodesGen uint64
}

// lookup returns the entry covering key, or nil when the cache has no range
// for it (empty, or a gap left by a partial update).
func (s *snapshot) lookup(key []byte) *rangeEntry {
	i := sort.Search(len(s.ranges), func(i int) bool {
		return bytes.Compare(s.ranges[i].desc.GetStartKey(), key) > 0
	}) - 1
	if i < 0 || !s.ranges[i].contains(key) {
		return nil
	}
	return s.ranges[i]
}

// rangeCache holds the current snapshot. Reads are one atomic load; writes
// (full refreshes, descriptor updates from errors) serialize on mu so that
// concurrent updates are not lost.
type rangeCache struct {
	seeds    []string
	cur      atomic.Pointer[snapshot]
	mu       sync.Mutex
	nodesGen uint64 // last snapshot.nodesGen handed out; under mu
}

func newRangeCache(seeds []string) *rangeCache {
	rc := &rangeCache{seeds: seeds}
	rc.cur.Store(&snapshot{nodes: map[uint64]string{}, addrs: seeds})
	return rc
}

func (rc *rangeCache) load() *snapshot { return rc.cur.Load() }

// addrList is the seeds followed by the other known addresses in node id
// order, deduplicated.
func (rc *rangeCache) addrList(nodes map[uint64]string) []string {
	ids := make([]uint64, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	seen := make(map[string]bool, len(rc.seeds)+len(nodes))
	out := make([]string, 0, len(rc.seeds)+len(nodes))
	for _, a := range rc.seeds {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, id := range ids {
		if a := nodes[id]; a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// install replaces the range map with the one from Admin.Ranges. Entries whose
// descriptor did not change are reused, keeping leaseholder hints learned from
// the nodes themselves (fresher than the meta range's last report). Cached
// descriptors with a higher generation than the meta range's are kept: the
// meta range may lag behind a split the client has already been told about.
func (rc *rangeCache) install(resp *tidekvpb.RangesResponse) *snapshot {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	old := rc.cur.Load()

	nodes := make(map[uint64]string, len(resp.GetNodes())+len(old.nodes))
	for id, a := range old.nodes {
		nodes[id] = a
	}
	for _, n := range resp.GetNodes() {
		if n.GetGrpcAddr() != "" {
			nodes[n.GetNodeId()] = n.GetGrpcAddr()
		}
	}

	byID := make(map[uint64]*rangeEntry, len(old.ranges))
	for _, e := range old.ranges {
		byID[e.desc.GetRangeId()] = e
	}
	ranges := make([]*rangeEntry, 0, len(resp.GetRanges()))
	var newer []*rangeEntry
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		if d == nil {
			continue
		}
		oe := byID[d.GetRangeId()]
		switch {
		case oe != nil && oe.desc.GetGeneration() > d.GetGeneration():
			newer = append(newer, oe)
			continue
		case oe != nil && oe.desc.GetGeneration() == d.GetGeneration():
			if oe.leader.Load() == 0 && ri.GetLeaderNodeId() != 0 {
				oe.leader.Store(ri.GetLeaderNodeId())
			}
			ranges = append(ranges, oe)
		default:
			ranges = append(ranges, newEntry(d, ri.GetLeaderNodeId()))
		}
	}
	sortEntries(ranges)
	for _, e := range newer {
		ranges = mergeEntry(ranges, e)
	}
	rc.nodesGen++
	s := &snapshot{ranges: ranges, nodes: nodes, addrs: rc.addrList(nodes), epoch: old.epoch + 1, nodesGen: rc.nodesGen}
	rc.cur.Store(s)
	return s
}

// update folds in what a node told us in an ErrorDetail: its descriptor of
// the range (may be nil) and the leaseholder (may be 0 / ""). It returns the
// entry now caching desc, or nil if desc was nil.
func (rc *rangeCache) update(desc *tidekvpb.RangeDescriptor, leaderID uint64, leaderAddr string) *rangeEntry {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	old := rc.cur.Load()
	next := *old
	changed := false
	if leaderID != 0 && leaderAddr != "" && old.nodes[leaderID] != leaderAddr {
		next.nodes = make(map[uint64]string, len(old.nodes)+1)
		for id, a := range old.nodes {
			next.nodes[id] = a
		}
		next.nodes[leaderID] = leaderAddr
		next.addrs = rc.addrList(next.nodes)
		rc.nodesGen++
		next.nodesGen = rc.nodesGen
		changed = true
	}
	var entry *rangeEntry
	if desc != nil {
		for _, e := range old.ranges {
			if e.desc.GetRangeId() == desc.GetRangeId() && e.desc.GetGeneration() >= desc.GetGeneration() {
				entry = e // what we hold is as new or newer
				break
			}
		}
		if entry == nil {
			entry = newEntry(desc, 0)
			next.ranges = mergeEntry(append([]*rangeEntry(nil), old.ranges...), entry)
			changed = true
		}
		// Only trust the hint for the generation the node described: an old
		// node's view of an older descriptor says nothing about a newer one.
		if leaderID != 0 && entry.desc.GetGeneration() == desc.GetGeneration() {
			entry.leader.Store(leaderID)
		}
	}
	if changed {
		rc.cur.Store(&next)
	}
	return entry
}

// mergeEntry inserts e into the sorted ranges, dropping entries it overlaps
// (they are older views of the same keys). It may leave gaps, which lookups
// treat as misses that trigger a refresh.
func mergeEntry(ranges []*rangeEntry, e *rangeEntry) []*rangeEntry {
	out := ranges[:0]
	for _, o := range ranges {
		if !overlaps(o.desc, e.desc) {
			out = append(out, o)
		}
	}
	out = append(out, e)
	sortEntries(out)
	return out
}

func sortEntries(r []*rangeEntry) {
	sort.Slice(r, func(i, j int) bool {
		return bytes.Compare(r[i].desc.GetStartKey(), r[j].desc.GetStartKey()) < 0
	})
}
