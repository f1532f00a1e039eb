package server

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keyspace"
)

// keySpaceCounts is what one node counted of one key space since it
// started.
type keySpaceCounts struct {
	hits, misses, evictions atomic.Uint64
}

// keySpaceCounters are a node's counts by key space, kept beside the
// Prometheus counters because heartbeats carry them to the meta range,
// which sums them for `ctl keyspace list`.
type keySpaceCounters struct {
	m       *metrics
	mu      sync.Mutex
	bySpace map[keyspace.ID]*keySpaceCounts
}

func (c *keySpaceCounters) of(id keyspace.ID) *keySpaceCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.bySpace[id]
	if k == nil {
		if c.bySpace == nil {
			c.bySpace = map[keyspace.ID]*keySpaceCounts{}
		}
		k = &keySpaceCounts{}
		c.bySpace[id] = k
	}
	return k
}

// idLabel is the metrics label of key space id: its number.
func idLabel(id keyspace.ID) string { return strconv.FormatUint(uint64(id), 10) }

// read counts a point read of stored key key: a hit if it found a value.
func (c *keySpaceCounters) read(key []byte, found bool) {
	id := keyspace.Of(key)
	if found {
		c.of(id).hits.Add(1)
		c.m.keyspaceHits.WithLabelValues(idLabel(id)).Inc()
		return
	}
	c.of(id).misses.Add(1)
	c.m.keyspaceMisses.WithLabelValues(idLabel(id)).Inc()
}

// snapshot is the counts for a heartbeat.
func (c *keySpaceCounters) snapshot() []*tidekvpb.KeySpaceCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*tidekvpb.KeySpaceCounts, 0, len(c.bySpace))
	for id, k := range c.bySpace {
		out = append(out, &tidekvpb.KeySpaceCounts{Id: uint32(id), Hits: k.hits.Load(), Misses: k.misses.Load(), Evictions: k.evictions.Load()})
	}
	return out
}

// evicted counts n keys of key space id evicted by this node.
func (c *keySpaceCounters) evicted(id keyspace.ID, n int) {
	c.of(id).evictions.Add(uint64(n))
	c.m.keyspaceEvictions.WithLabelValues(idLabel(id)).Add(float64(n))
}
