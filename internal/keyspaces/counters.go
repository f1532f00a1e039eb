package keyspaces

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/metrics"
)

// counts is what one node counted of one key space since it
// started, with its Prometheus counters resolved once (a label lookup per
// read would cost more than the count).
type counts struct {
	hits, misses, evictions    atomic.Uint64
	hitsC, missesC, evictionsC prometheus.Counter
}

// counters are a node's counts by key space, kept beside the
// Prometheus counters because heartbeats carry them to the meta range,
// which sums them for `ctl keyspace list`.
type counters struct {
	m       *metrics.Set
	mu      sync.RWMutex
	bySpace map[keyspace.ID]*counts
}

func (c *counters) of(id keyspace.ID) *counts {
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
			c.bySpace = map[keyspace.ID]*counts{}
		}
		l := metrics.IDLabel(id)
		k = &counts{hitsC: c.m.KeyspaceHits.WithLabelValues(l), missesC: c.m.KeyspaceMisses.WithLabelValues(l),
			evictionsC: c.m.KeyspaceEvictions.WithLabelValues(l)}
		c.bySpace[id] = k
	}
	return k
}

// read counts a point read of stored key key: a hit if it found a value.
func (c *counters) read(key []byte, found bool) {
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
func (c *counters) snapshot() []*tidekvpb.KeySpaceCounts {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*tidekvpb.KeySpaceCounts, 0, len(c.bySpace))
	for id, k := range c.bySpace {
		out = append(out, &tidekvpb.KeySpaceCounts{Id: uint32(id), Hits: k.hits.Load(), Misses: k.misses.Load(), Evictions: k.evictions.Load()})
	}
	return out
}

// evicted counts n keys of key space id evicted by this node.
func (c *counters) evicted(id keyspace.ID, n int) {
	k := c.of(id)
	k.evictions.Add(uint64(n))
	k.evictionsC.Add(float64(n))
}

// CountRead counts a point read of stored key key: a hit if it found a
// value.
func (sp *Spaces) CountRead(key []byte, found bool) { sp.counters.read(key, found) }

// Counts are the node's counts by key space since it started, for a
// heartbeat.
func (sp *Spaces) Counts() []*tidekvpb.KeySpaceCounts { return sp.counters.snapshot() }
