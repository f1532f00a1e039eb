package cache

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/tidekv/tidekv/internal/units"
)

// Candidate is one key sampled from a range this node leads.
type Candidate struct {
	Key   []byte // stored key
	Range uint64
	// Bytes is what deleting it frees: key and value, as range sizes count.
	Bytes uint64
	// LastUsed is the key's last use on this node (zero: not remembered).
	LastUsed time.Time
}

// Space is what the node sees of one key space with a capacity.
type Space struct {
	Name     string
	Capacity uint64
	// Held is the bytes of the key space's replicas on this node, Led the
	// part of them in ranges this node leads.
	Held, Led uint64
	// Evicting says the previous round was evicting (a round keeps on
	// until the node is under the low-water mark).
	Evicting bool
	// Sample is this round's candidates, from the ranges this node leads.
	Sample []Candidate
}

// Plan is one round's decision for one key space on one node.
type Plan struct {
	// Evicting: the node is above the key space's capacity, or was and is
	// not yet under the low-water mark.
	Evicting bool
	// Started: Evicting now and not in the previous round (an event).
	Started bool
	// Evict is the keys to delete, least recently used first.
	Evict []Candidate
	// Reason says why, with numbers (empty when not evicting).
	Reason string
}

// Decide picks the keys one node evicts of one key space this round.
//
// Eviction starts when the node's share is over the capacity and goes on
// until it is under LowWater of it. A node frees its leases' part of the
// excess (excess × Led/Held): every node holding replicas of the key space
// decides the same way, and a range's bytes are on each of its replicas, so
// each node's leaseholders freeing their own ranges' part removes the excess
// once, not once per replica. The keys go least recently used first (keys
// not remembered first of all, then by key so the choice is
// deterministic), at most a quarter of the sample and MaxEvictKeys: a round
// never evicts a key used more recently than three quarters of the keys it
// looked at.
func Decide(sp Space, cfg Config, now time.Time) Plan {
	low := uint64(float64(sp.Capacity) * cfg.LowWater)
	if sp.Capacity == 0 || !(sp.Held > sp.Capacity || (sp.Evicting && sp.Held > low)) {
		return Plan{}
	}
	p := Plan{Evicting: true, Started: !sp.Evicting}
	head := fmt.Sprintf("key space %q holds %s on this node, over its capacity of %s", sp.Name, units.Human(sp.Held), units.Human(sp.Capacity))
	if sp.Evicting && sp.Held <= sp.Capacity {
		head = fmt.Sprintf("key space %q holds %s on this node, above the low-water mark of %s", sp.Name, units.Human(sp.Held), units.Human(low))
	}
	if sp.Led == 0 {
		p.Reason = head + ": this node leads none of its ranges, their leaseholders evict"
		return p
	}
	target := uint64(float64(sp.Held-low) * float64(min(sp.Led, sp.Held)) / float64(sp.Held))
	sample := append([]Candidate(nil), sp.Sample...)
	sort.Slice(sample, func(i, j int) bool {
		a, b := sample[i], sample[j]
		if !a.LastUsed.Equal(b.LastUsed) {
			return a.LastUsed.Before(b.LastUsed)
		}
		return bytes.Compare(a.Key, b.Key) < 0
	})
	limit := min(max(len(sample)/4, 1), cfg.MaxEvictKeys)
	var freed uint64
	for _, c := range sample {
		if freed >= target || len(p.Evict) >= limit {
			break
		}
		p.Evict = append(p.Evict, c)
		freed += c.Bytes
	}
	p.Reason = fmt.Sprintf("%s: evicting %d least recently used keys (%s of the %s this node's leases answer for)%s",
		head, len(p.Evict), units.Human(freed), units.Human(target), newest(p.Evict, now))
	return p
}

// newest says how long ago the most recently used evicted key was used.
func newest(ev []Candidate, now time.Time) string {
	if len(ev) == 0 {
		return ""
	}
	last := ev[len(ev)-1].LastUsed
	if last.IsZero() {
		return ", none used since this node leads their range"
	}
	return fmt.Sprintf(", the most recent last used %s ago", now.Sub(last).Round(time.Millisecond))
}
