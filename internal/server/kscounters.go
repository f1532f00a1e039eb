package server

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/metrics"
)

// keySpaceCounts is what one node counted of one key space since it
// started, with its Prometheus counters resolved once (a label lookup per
// read would cost more than the count).
type keySpaceCounts struct {
	hits, misses, evictions    atomic.Uint64
	hitsC, missesC, evictionsC prometheus.Counter
}

// keySpaceCounters are a node's counts by key space, kept beside the
// Prometheus counters because heartbeats carry them to the meta range,
// which sums them for `ctl keyspace list`.
type keySpaceCounters struct {
	m       *metrics.Set
	mu      sync.RWMutex
	bySpace map[keyspace.ID]*keySpaceCounts
}

func (c *keySpaceCounters) of(id keyspace.ID) *keySpaceCounts {
	c.mu.RLock()
	k := c.bySpace[id]
	c.mu.RUnlock()
	if k != nil {
		return k
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if k = c.bySpace[id]; k == nil {
		if c.bySpace == nil {
			c.bySpace = map[keyspace.ID]*keySpaceCounts{}
		}
		l := metrics.IDLabel(id)
		k = &keySpaceCounts{hitsC: c.m.KeyspaceHits.WithLabelValues(l), missesC: c.m.KeyspaceMisses.WithLabelValues(l),
			evictionsC: c.m.KeyspaceEvictions.WithLabelValues(l)}
		c.bySpace[id] = k
	}
	return k
}

// read counts a point read of stored key key: a hit if it found a value.
func (c *keySpaceCounters) read(key []byte, found bool) {
	k := c.of(keyspace.Of(key))
	if found {
		k.hits.Add(1)
		k.hitsC.Inc()
		return
	}
	k.misses.Add(1)
	k.missesC.Inc()
}

// snapshot is the counts for a heartbeat.
func (c *keySpaceCounters) snapshot() []*tidekvpb.KeySpaceCounts {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*tidekvpb.KeySpaceCounts, 0, len(c.bySpace))
	for id, k := range c.bySpace {
		out = append(out, &tidekvpb.KeySpaceCounts{Id: uint32(id), Hits: k.hits.Load(), Misses: k.misses.Load(), Evictions: k.evictions.Load()})
	}
	return out
}

// evicted counts n keys of key space id evicted by this node.
func (c *keySpaceCounters) evicted(id keyspace.ID, n int) {
	k := c.of(id)
	k.evictions.Add(uint64(n))
	k.evictionsC.Add(float64(n))
}
