package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// MemNetwork connects in-process nodes. Messages between a pair of nodes are
// delivered in order by one goroutine per pair; links can be cut in either
// direction to simulate partitions.
type MemNetwork struct {
	mu       sync.Mutex
	handlers map[uint64]Handler
	cut      map[[2]uint64]bool
	pipes    map[[2]uint64]chan *tidekvpb.RaftMessage
	stopper  chan struct{}
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{
		handlers: map[uint64]Handler{},
		cut:      map[[2]uint64]bool{},
		pipes:    map[[2]uint64]chan *tidekvpb.RaftMessage{},
		stopper:  make(chan struct{}),
	}
}

// Register attaches (or replaces, on restart) a node's handler.
func (n *MemNetwork) Register(node uint64, h Handler) {
	n.mu.Lock()
	n.handlers[node] = h
	n.mu.Unlock()
}

// Unregister detaches a node, as if it crashed.
func (n *MemNetwork) Unregister(node uint64) {
	n.mu.Lock()
	delete(n.handlers, node)
	n.mu.Unlock()
}

// SetCut drops (or restores) traffic from one node to another.
func (n *MemNetwork) SetCut(from, to uint64, cut bool) {
	n.mu.Lock()
	n.cut[[2]uint64{from, to}] = cut
	n.mu.Unlock()
}

// Isolate cuts (or restores) all traffic to and from node.
func (n *MemNetwork) Isolate(node uint64, nodes []uint64, cut bool) {
	for _, o := range nodes {
		if o != node {
			n.SetCut(node, o, cut)
			n.SetCut(o, node, cut)
		}
	}
}

// Close stops delivery goroutines.
func (n *MemNetwork) Close() { close(n.stopper) }

func (n *MemNetwork) target(from, to uint64) (Handler, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[[2]uint64{from, to}] {
		return nil, false
	}
	h, ok := n.handlers[to]
	return h, ok
}

// Transport returns node's endpoint on the network.
func (n *MemNetwork) Transport(node uint64) *Mem { return &Mem{net: n, node: node} }

// Mem is one node's endpoint on a MemNetwork.
type Mem struct {
	net  *MemNetwork
	node uint64
}

// Send queues m for asynchronous, ordered delivery.
func (t *Mem) Send(m *tidekvpb.RaftMessage) bool {
	n := t.net
	key := [2]uint64{t.node, m.GetToNodeId()}
	n.mu.Lock()
	p := n.pipes[key]
	if p == nil {
		p = make(chan *tidekvpb.RaftMessage, 8192)
		n.pipes[key] = p
		go n.deliver(key, p)
	}
	n.mu.Unlock()
	// Copy so sender and receiver never share a mutable message.
	m = proto.Clone(m).(*tidekvpb.RaftMessage)
	select {
	case p <- m:
		return true
	default:
		return false
	}
}

func (n *MemNetwork) deliver(key [2]uint64, p chan *tidekvpb.RaftMessage) {
	for {
		select {
		case <-n.stopper:
			return
		case m := <-p:
			if h, ok := n.target(key[0], key[1]); ok {
				h.HandleRaftMessage(m)
			}
		}
	}
}

// SendSnapshot hands the SST to the receiver synchronously.
func (t *Mem) SendSnapshot(ctx context.Context, header *tidekvpb.RaftMessage, sst io.Reader) error {
	h, ok := t.net.target(t.node, header.GetToNodeId())
	if !ok {
		return fmt.Errorf("node %d unreachable", header.GetToNodeId())
	}
	data, err := io.ReadAll(sst)
	if err != nil {
		return err
	}
	return h.HandleSnapshot(proto.Clone(header).(*tidekvpb.RaftMessage), bytes.NewReader(data))
}
