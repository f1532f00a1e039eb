package gossip

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// State is a member's state as one node sees it.
type State int

const (
	// Alive: the member answers probes.
	Alive State = iota + 1
	// Suspect: this node's probe of the member failed; it is Dead unless it
	// refutes within the suspicion timeout.
	Suspect
	// Dead: memberlist declared the member failed (it stopped or is
	// unreachable without leaving).
	Dead
	// Left: the member left gracefully (Leave).
	Left
)

func (s State) String() string {
	switch s {
	case Alive:
		return "alive"
	case Suspect:
		return "suspect"
	case Dead:
		return "dead"
	case Left:
		return "left"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// Member is one TideKV node as this node sees it.
type Member struct {
	NodeID     uint64
	GRPCAddr   string // from the member's metadata
	GossipAddr string // host:port memberlist reaches it at
	State      State
	// Since is when the member entered State, by this node's clock (the
	// now func given to Start). Placement measures its grace from it.
	Since time.Time
}

// Membership is what consumers (placement) depend on. *Gossip and *Fake
// implement it.
type Membership interface {
	// Members returns a snapshot of the known TideKV members, this node
	// included, sorted by NodeID.
	Members() []Member
}

var (
	_ Membership = (*Gossip)(nil)
	_ Membership = (*Fake)(nil)
)

// Fake is an in-memory Membership for tests: members are whatever Set and
// Put last said.
type Fake struct {
	mu      sync.Mutex
	members map[uint64]Member
}

// NewFake returns an empty Fake.
func NewFake() *Fake { return &Fake{members: make(map[uint64]Member)} }

// Set sets nodeID's state and the time it entered it, adding the member
// (with empty addresses) if it is new.
func (f *Fake) Set(nodeID uint64, state State, since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.members[nodeID]
	m.NodeID, m.State, m.Since = nodeID, state, since
	f.members[nodeID] = m
}

// Put adds or replaces a whole member.
func (f *Fake) Put(m Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members[m.NodeID] = m
}

// Remove forgets nodeID.
func (f *Fake) Remove(nodeID uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.members, nodeID)
}

// Members implements Membership.
func (f *Fake) Members() []Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m)
	}
	sortMembers(out)
	return out
}

func sortMembers(ms []Member) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].NodeID < ms[j].NodeID })
}
