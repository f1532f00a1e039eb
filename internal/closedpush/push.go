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
	// Delay is the emulated WAN latency to it.
	Blocked(peer uint64) bool
	Delay(peer uint64) time.Duration
	// Conn is the node's connection to the peer at addr.
	Conn(addr string) grpc.ClientConnInterface
	// Closed is the closed timestamps to send, by peer; Load the node's
	// own load now.
	Closed() map[uint64][]*tidekvpb.ClosedTimestamp
	Load() *tidekvpb.NodeLoad
	// Stamp is the node's clock now, for a message; Begin starts an
	// offset sample, and Answered takes the peer's answer to it.
	Stamp() *tidekvpb.Timestamp
	Begin() clockwatch.Sample
	Answered(peer uint64, s clockwatch.Sample, now time.Time, resp *tidekvpb.ClosedTimestampsResponse)
}

// Pusher sends a node's rounds and keeps the loads it hears.
type Pusher struct {
	node    Node
	stopper <-chan struct{}
	loads   loadTable
	busy    sync.Map // peer node ID -> *atomic.Bool
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

// Round sends this round's messages, one per peer, without waiting; a
// peer whose previous message is still on its way is skipped this round.
func (p *Pusher) Round(context.Context) {
	n := p.node
	byPeer := n.Closed()
	load := n.Load()
	p.Note(load)
	for _, d := range n.Peers() {
		peer := d.GetNodeId()
		if peer == n.ID() || d.GetGrpcAddr() == "" || n.Blocked(peer) {
			continue
		}
		busy := p.pushing(peer)
		if !busy.CompareAndSwap(false, true) {
			continue
		}
		req := &tidekvpb.ClosedTimestampsRequest{FromNodeId: n.ID(), Closed: byPeer[peer], Load: load}
		go func(peer uint64, addr string) {
			defer busy.Store(false)
			// Emulated WAN latency applies to this traffic too, or
			// followers far away would look fresher than they are.
			if d := n.Delay(peer); d > 0 {
				select {
				case <-time.After(d):
				case <-p.stopper:
					return
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			// The send and receive times bracket the peer's answer for
			// the offset estimate (internal/clockwatch).
			req.Hlc = n.Stamp()
			sample := n.Begin()
			resp, err := tidekvpb.NewAdminClient(n.Conn(addr)).PushClosedTimestamps(ctx, req)
			if err == nil {
				n.Answered(peer, sample, time.Now(), resp)
				p.Note(resp.GetLoad())
			}
		}(peer, d.GetGrpcAddr())
	}
}

func (p *Pusher) pushing(peer uint64) *atomic.Bool {
	v, _ := p.busy.LoadOrStore(peer, new(atomic.Bool))
	return v.(*atomic.Bool)
}
