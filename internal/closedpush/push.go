package closedpush

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/clockwatch"
)

// Node is the node as its side transport sees it.
type Node interface {
	// ID is this node's ID; Peers the nodes in its directory.
	ID() uint64
	Peers() []*tidekvpb.NodeDescriptor
	// Blocked reports whether an injected partition cuts peer off;
	// Delay is the emulated WAN latency from this node to peer, DelayFrom
	// the one from peer to this node.
	Blocked(peer uint64) bool
	Delay(peer uint64) time.Duration
	DelayFrom(peer uint64) time.Duration
	// Conn is the node's connection to the peer at addr.
	Conn(addr string) grpc.ClientConnInterface
	// Closed is the closed timestamps to send, by peer; Load the node's
	// own load now.
	Closed() map[uint64][]*tidekvpb.ClosedTimestamp
	Load() *tidekvpb.NodeLoad
	// Stamp is the node's clock now, for a message; Begin starts an
	// offset sample, and Answered takes the clock in the peer's answer to
	// it, reporting whether the answer's HLC was accepted; Estimate is,
	// once, the offset of peer's clock measured from the latest answer
	// (nil if none), which the next exchange sends the peer.
	Stamp() *tidekvpb.Timestamp
	Begin() clockwatch.Sample
	Answered(peer uint64, s clockwatch.Sample, now time.Time, resp *tidekvpb.ClosedTimestampsResponse) bool
	Estimate(peer uint64) *tidekvpb.OffsetEstimate
	// Apply applies closed timestamps a peer answered with.
	Apply(closed []*tidekvpb.ClosedTimestamp)
}

// Pusher sends a node's rounds and keeps the loads it hears.
type Pusher struct {
	node    Node
	stopper <-chan struct{}
	loads   loadTable
	busy    sync.Map // peer node ID -> *atomic.Bool
	// oneWay holds the peers last heard pushing without exchange: binaries
	// from before it, which push to every peer and answer without closed
	// timestamps, so this node sends them its own whatever their IDs.
	oneWay sync.Map // peer node ID -> struct{}
}

// New pushes for node until stopper closes.
func New(node Node, stopper <-chan struct{}) *Pusher {
	return &Pusher{node: node, stopper: stopper}
}

// loadTable holds the newest load heard from each node.
type loadTable struct {
	mu    sync.Mutex
	loads map[uint64]*tidekvpb.NodeLoad
}

// Note keeps l if it is the newest heard from its node.
func (p *Pusher) Note(l *tidekvpb.NodeLoad) {
	t := &p.loads
	if l == nil || l.GetNodeId() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.loads == nil {
		t.loads = map[uint64]*tidekvpb.NodeLoad{}
	}
	if cur := t.loads[l.GetNodeId()]; cur == nil || cur.GetUnixNanos() <= l.GetUnixNanos() {
		t.loads[l.GetNodeId()] = l
	}
}

// Loads is the newest load heard from each node.
func (p *Pusher) Loads() []*tidekvpb.NodeLoad {
	t := &p.loads
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*tidekvpb.NodeLoad, 0, len(t.loads))
	for _, l := range t.loads {
		out = append(out, l)
	}
	return out
}

// Heard takes what a peer's request says besides its closed timestamps
// and clock (which the receiving service applies): its load, and whether
// it exchanges; the service answers with its closed timestamps for the
// peer when req.Exchange.
func (p *Pusher) Heard(req *tidekvpb.ClosedTimestampsRequest) {
	p.Note(req.GetLoad())
	if from := req.GetFromNodeId(); req.GetExchange() {
		p.oneWay.Delete(from)
	} else if from != 0 {
		p.oneWay.Store(from, struct{}{})
	}
}

// initiates reports whether this node starts the exchange with peer: the
// lower ID of a pair does, and every node pushes to a peer that pushes
// without exchange.
func (p *Pusher) initiates(peer uint64) bool {
	if p.node.ID() < peer {
		return true
	}
	_, old := p.oneWay.Load(peer)
	return old
}

// Round starts this round's exchanges, one per peer this node initiates
// with, without waiting; a peer whose previous exchange is still on its
// way is skipped this round.
func (p *Pusher) Round(context.Context) {
	n := p.node
	byPeer := n.Closed()
	load := n.Load()
	p.Note(load)
	for _, d := range n.Peers() {
		peer := d.GetNodeId()
		if peer == n.ID() || d.GetGrpcAddr() == "" || n.Blocked(peer) || !p.initiates(peer) {
			continue
		}
		busy := p.pushing(peer)
		if !busy.CompareAndSwap(false, true) {
			continue
		}
		req := &tidekvpb.ClosedTimestampsRequest{FromNodeId: n.ID(), Closed: byPeer[peer], Load: load, Exchange: true, Offset: n.Estimate(peer)}
		go p.exchange(peer, d.GetGrpcAddr(), req, busy)
	}
}

// exchange sends req to peer and takes its answer.
func (p *Pusher) exchange(peer uint64, addr string, req *tidekvpb.ClosedTimestampsRequest, busy *atomic.Bool) {
	n := p.node
	// Emulated WAN latency applies to this traffic too, both ways, or
	// followers far away would look fresher than they are. The offset
	// sample brackets the call alone, as the clocks' true offset does not
	// include it.
	if !p.wait(n.Delay(peer)) {
		busy.Store(false)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// The send and receive times bracket the peer's answer for the offset
	// estimate (internal/clockwatch).
	req.Hlc = n.Stamp()
	sample := n.Begin()
	resp, err := tidekvpb.NewAdminClient(n.Conn(addr)).PushClosedTimestamps(ctx, req)
	if err != nil {
		busy.Store(false)
		return
	}
	accepted := n.Answered(peer, sample, time.Now(), resp)
	// The answer is in: the next round may start the next exchange while
	// this one's answer is still on its emulated way back.
	busy.Store(false)
	if !p.wait(n.DelayFrom(peer)) {
		return
	}
	// Closed timestamps from a peer whose clock runs beyond the maximum
	// offset ahead would let followers serve reads staler than their bound.
	if accepted {
		n.Apply(resp.GetClosed())
	}
	p.Note(resp.GetLoad())
}

// wait waits d, false if the node stops first.
func (p *Pusher) wait(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.stopper:
		return false
	}
}

func (p *Pusher) pushing(peer uint64) *atomic.Bool {
	v, _ := p.busy.LoadOrStore(peer, new(atomic.Bool))
	return v.(*atomic.Bool)
}
