package transport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Partition is the set of peers one node is cut off from, for fault
// injection: the node's transport loses Raft messages and snapshots to and
// from them, as a network partition would, while clients still reach the
// node. Cutting one node from every peer (Isolate) is a full two-way
// partition of it from the rest, so a fault needs only that node's say.
//
// Reads are one atomic load, because every Send and every received
// message asks. The zero value cuts nothing; a nil *Partition reads as
// healed.
type Partition struct {
	cut atomic.Pointer[cutSet]
}

// cutSet is an immutable set of cut peers; all cuts every peer.
type cutSet struct {
	all   bool
	peers []uint64
}

// Isolate cuts every peer.
func (p *Partition) Isolate() { p.cut.Store(&cutSet{all: true}) }

// Cut cuts exactly peers (none heals).
func (p *Partition) Cut(peers []uint64) {
	if len(peers) == 0 {
		p.Heal()
		return
	}
	s := slices.Clone(peers)
	slices.Sort(s)
	p.cut.Store(&cutSet{peers: slices.Compact(s)})
}

// Heal restores traffic with every peer.
func (p *Partition) Heal() { p.cut.Store(nil) }

// Blocked reports whether traffic with peer is cut.
func (p *Partition) Blocked(peer uint64) bool {
	if p == nil {
		return false
	}
	s := p.cut.Load()
	return s != nil && (s.all || slices.Contains(s.peers, peer))
}

// String is "none", "all" or the cut peers, comma-separated.
func (p *Partition) String() string {
	var s *cutSet
	if p != nil {
		s = p.cut.Load()
	}
	switch {
	case s == nil:
		return "none"
	case s.all:
		return "all"
	}
	ids := make([]string, len(s.peers))
	for i, id := range s.peers {
		ids[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(ids, ",")
}

// errPartitioned is what a snapshot to or from a cut peer fails with.
func errPartitioned(peer uint64) error {
	return fmt.Errorf("node %d is cut off by an injected partition", peer)
}
