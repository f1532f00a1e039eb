package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// MemNetwork connects in-process nodes. Messages between a pair of nodes are
// delivered in order by one goroutine per pair; links can be cut in either
// direction to simulate partitions, and delayed (SetDelays) to emulate WAN
// latency. A crash (Unregister) loses every message to the node that is
// still on the wire, and whatever is sent to it until it is registered
// again, as a dead process's connections lose theirs: the restarted node
// never receives what was sent to the one that crashed.
type MemNetwork struct {
	mu       sync.Mutex
	handlers map[uint64]Handler
	// lives counts each node's crashes: a message is delivered only to the
	// life of its node it was sent to.
	lives   map[uint64]uint64
	cut     map[[2]uint64]bool
	pipes   map[[2]uint64]chan inFlight
	delays  atomic.Pointer[Delays]
	stopper chan struct{}
}

// inFlight is a message on a pair's wire and the life of the receiving
// node it was sent to.
type inFlight struct {
	queued
	life uint64
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{
		handlers: map[uint64]Handler{},
		lives:    map[uint64]uint64{},
		cut:      map[[2]uint64]bool{},
		pipes:    map[[2]uint64]chan inFlight{},
		stopper:  make(chan struct{}),
	}
}

// Register attaches (or replaces, on restart) a node's handler.
func (n *MemNetwork) Register(node uint64, h Handler) {
	n.mu.Lock()
	n.handlers[node] = h
	n.mu.Unlock()
}

// Unregister detaches a node, as if it crashed: messages to it on the wire
// are lost.
func (n *MemNetwork) Unregister(node uint64) {
	n.mu.Lock()
	delete(n.handlers, node)
	n.lives[node]++
	n.mu.Unlock()
}

// SetCut drops (or restores) traffic from one node to another.
func (n *MemNetwork) SetCut(from, to uint64, cut bool) {
	n.mu.Lock()
	n.cut[[2]uint64{from, to}] = cut
	n.mu.Unlock()
}

// SetDelays makes messages and snapshots from node A to node B arrive
// d.Get(A, B) after they are sent (per-pair order is kept); nil removes
// emulated latency. The table can be changed later; each message keeps the
// delay in force when it was sent. Cuts apply at delivery, so a cut made
// while a message is on the emulated wire loses it; messages on the wire
// count against the pair's 8192-message pipe.
func (n *MemNetwork) SetDelays(d *Delays) { n.delays.Store(d) }

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

// target returns the handler of node to and its current life, unless the
// link from→to is cut or to is down.
func (n *MemNetwork) target(from, to uint64) (h Handler, life uint64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[[2]uint64{from, to}] {
		return nil, 0, false
	}
	h, ok = n.handlers[to]
	return h, n.lives[to], ok
}

// Transport returns node's endpoint on the network.
func (n *MemNetwork) Transport(node uint64) *Mem { return &Mem{net: n, node: node} }

// Mem is one node's endpoint on a MemNetwork.
type Mem struct {
	net  *MemNetwork
	node uint64
}

// Send queues m for asynchronous, ordered delivery. A message to a node
// that is down is lost on the wire: the sender is not told, as with a real
// crash.
func (t *Mem) Send(m *tidekvpb.RaftMessage) bool {
	n := t.net
	key := [2]uint64{t.node, m.GetToNodeId()}
	n.mu.Lock()
	_, up := n.handlers[key[1]]
	life := n.lives[key[1]]
	p := n.pipes[key]
	if p == nil {
		p = make(chan inFlight, 8192)
		n.pipes[key] = p
		go n.deliver(key, p)
	}
	n.mu.Unlock()
	if !up {
		return true
	}
	// Copy so sender and receiver never share a mutable message.
	m = proto.Clone(m).(*tidekvpb.RaftMessage)
	select {
	case p <- inFlight{queued: queued{m: m, due: n.delays.Load().dueTime(t.node, key[1])}, life: life}:
		return true
	default:
		return false
	}
}

// deliver hands a pair's messages over in order. The pipe is a delay line:
// each message waits only until its own due time, so a burst arrives one
// delay later, not one delay per message.
func (n *MemNetwork) deliver(key [2]uint64, p chan inFlight) {
	var timer *time.Timer
	for {
		select {
		case <-n.stopper:
			return
		case e := <-p:
			if e.due != 0 && !n.delays.Load().clockOf().waitUntil(&timer, e.due, n.stopper) {
				return
			}
			if h, life, ok := n.target(key[0], key[1]); ok && life == e.life {
				h.HandleRaftMessage(e.m)
			}
		}
	}
}

// SendSnapshot hands the SST to the receiver synchronously, after the
// pair's emulated delay if any.
func (t *Mem) SendSnapshot(ctx context.Context, header *tidekvpb.RaftMessage, sst io.Reader) error {
	if err := t.net.delays.Load().sleepCtx(ctx, t.node, header.GetToNodeId()); err != nil {
		return err
	}
	h, _, ok := t.net.target(t.node, header.GetToNodeId())
	if !ok {
		return fmt.Errorf("node %d unreachable", header.GetToNodeId())
	}
	data, err := io.ReadAll(sst)
	if err != nil {
		return err
	}
	return h.HandleSnapshot(proto.Clone(header).(*tidekvpb.RaftMessage), bytes.NewReader(data))
}
