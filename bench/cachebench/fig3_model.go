package cachebench

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/elastic"
)

// model is one cache key space at key level: which node holds each key,
// the ranges (intervals of the key hash, as in a hashed key space) and
// their nodes, each node's memory of last uses. The eviction decision is
// cache.Decide and the growth decision elastic.Overflow, the code nodes
// and the planner run; what the model leaves out is time spent moving.
type model struct {
	cfg    Fig3Config
	keys   [][]byte // stored key of key i
	hashes []uint64 // its place in the hashed key space
	byKey  map[string]int32
	entry  []uint64 // its bytes: stored key and value, as range sizes count
	// at is the node holding key i (-1: not cached), slot its place in
	// that node's key list.
	at, slot []int32
	ranges   []mrange // by ascending lo; a range ends where the next starts
	nodes    []*mnode
	live     []uint64 // node IDs (index + 1) serving
	// pending are the steps at which asked-for nodes join.
	pending   []int
	overflow  *elastic.Overflow
	nextRange uint64
	evicted   int
}

type mrange struct {
	id, gen uint64
	lo      uint64
	node    int
	bytes   uint64
}

type mnode struct {
	keys     []int32
	held     uint64
	evicting bool
	// hand is where the next eviction round's sample starts: a clock hand
	// over the node's keys, as the server's rounds read their ranges.
	hand    int
	recency *cache.Recency
}

// newModel is an empty cache of nodes nodes (the first nodes when it
// grows) holding cfg.Ranges ranges of equal hash width in order.
func newModel(cfg Fig3Config, nodes int, grow bool) *model {
	m := &model{cfg: cfg, byKey: make(map[string]int32, cfg.Keys)}
	for i := 0; i < cfg.Keys; i++ {
		k := benchSpace.Encode(fmt.Appendf(nil, "q%08d", i))
		m.keys = append(m.keys, k)
		u, _ := benchSpace.Decode(k)
		m.hashes = append(m.hashes, keyspace.Hash(u))
		m.byKey[string(k)] = int32(i)
		m.entry = append(m.entry, uint64(len(k)+cfg.ValueBytes))
		m.at = append(m.at, -1)
		m.slot = append(m.slot, -1)
	}
	width := math.MaxUint64/uint64(cfg.Ranges) + 1
	for i := 0; i < cfg.Ranges; i++ {
		m.ranges = append(m.ranges, mrange{id: uint64(i + 1), gen: 1, lo: uint64(i) * width, node: i * nodes / cfg.Ranges})
	}
	m.nextRange = uint64(cfg.Ranges + 1)
	for i := 0; i < nodes; i++ {
		m.addNode()
	}
	if grow {
		m.overflow = elastic.NewOverflow(cfg.Overflow)
	}
	return m
}

func (m *model) addNode() {
	m.nodes = append(m.nodes, &mnode{recency: cache.NewRecency(m.cfg.Cache.TrackedKeys)})
	m.live = append(m.live, uint64(len(m.nodes)))
}

// rangeOf is the index of the range holding hash h.
func (m *model) rangeOf(h uint64) int {
	return sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].lo > h }) - 1
}

// query reads key k at time at and reports a hit; a miss fetches the
// value from the origin and caches it on the key's node.
func (m *model) query(k int, at time.Time) bool {
	if n := m.at[k]; n >= 0 {
		m.nodes[n].recency.Touch(m.keys[k], at)
		return true
	}
	n := m.ranges[m.rangeOf(m.hashes[k])].node
	m.add(k, n)
	m.nodes[n].recency.Touch(m.keys[k], at)
	return false
}

func (m *model) add(k, n int) {
	nd := m.nodes[n]
	m.at[k], m.slot[k] = int32(n), int32(len(nd.keys))
	nd.keys = append(nd.keys, int32(k))
	nd.held += m.entry[k]
	m.ranges[m.rangeOf(m.hashes[k])].bytes += m.entry[k]
}

func (m *model) remove(k int) {
	nd := m.nodes[m.at[k]]
	last := nd.keys[len(nd.keys)-1]
	nd.keys[m.slot[k]] = last
	m.slot[last] = m.slot[k]
	nd.keys = nd.keys[:len(nd.keys)-1]
	nd.held -= m.entry[k]
	m.ranges[m.rangeOf(m.hashes[k])].bytes -= m.entry[k]
	m.at[k], m.slot[k] = -1, -1
}

// evict runs one eviction round on node n if it is over its capacity or
// still evicting. The server runs a round every Cache.EvictInterval, one
// second, which is one step: between rounds a node may go over its
// capacity by what one step inserts, as a server's does.
func (m *model) evict(n int, at time.Time) {
	nd := m.nodes[n]
	if nd.held <= m.cfg.CapacityPerNode && !nd.evicting {
		return
	}
	sp := cache.Space{Name: "cache", Capacity: m.cfg.CapacityPerNode, Held: nd.held, Led: nd.held,
		Evicting: nd.evicting, Sample: m.sample(n)}
	plan := cache.Decide(sp, m.cfg.Cache, at)
	nd.evicting = plan.Evicting
	for _, c := range plan.Evict {
		nd.recency.Forget(c.Key)
		m.remove(int(m.byKey[string(c.Key)]))
		m.evicted++
	}
}

// sample is the round's candidates: Cache.SampleKeys for each range the
// node holds, read from the clock hand on.
func (m *model) sample(n int) []cache.Candidate {
	nd := m.nodes[n]
	held := 0
	for _, r := range m.ranges {
		if r.node == n {
			held++
		}
	}
	count := min(m.cfg.Cache.SampleKeys*held, len(nd.keys))
	out := make([]cache.Candidate, 0, count)
	for i := 0; i < count; i++ {
		k := nd.keys[(nd.hand+i)%len(nd.keys)]
		r := m.ranges[m.rangeOf(m.hashes[k])]
		out = append(out, cache.Candidate{Key: m.keys[k], Range: r.id, Bytes: m.entry[k], LastUsed: nd.recency.LastUsed(m.keys[k])})
	}
	if len(nd.keys) > 0 {
		nd.hand = (nd.hand + count) % len(nd.keys)
	}
	return out
}
