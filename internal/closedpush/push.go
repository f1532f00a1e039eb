package closedpush

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	node Node
	// ctx ends when stopper closes, and with it every stream to a peer.
	ctx     context.Context
	stopper <-chan struct{}
	loads   loadTable
	links   sync.Map // peer node ID -> *link
}

// New pushes for node until stopper closes.
func New(node Node, stopper <-chan struct{}) *Pusher {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stopper
		cancel()
	}()
	return &Pusher{node: node, ctx: ctx, stopper: stopper}
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
		l := p.link(peer)
		if !l.busy.CompareAndSwap(false, true) {
			continue
		}
		req := &tidekvpb.ClosedTimestampsRequest{FromNodeId: n.ID(), Closed: byPeer[peer], Load: load}
		go func(peer uint64, addr string) {
			defer l.busy.Store(false)
			// Emulated WAN latency applies to this traffic too, or
			// followers far away would look fresher than they are.
			if d := n.Delay(peer); d > 0 {
				select {
				case <-time.After(d):
				case <-p.stopper:
					return
				}
			}
			// The send and receive times bracket the peer's answer for
			// the offset estimate (internal/clockwatch).
			req.Hlc = n.Stamp()
			sample := n.Begin()
			resp, err := l.exchange(p.ctx, n.Conn(addr), addr, req)
			if err == nil {
				n.Answered(peer, sample, time.Now(), resp)
				p.Note(resp.GetLoad())
			}
		}(peer, d.GetGrpcAddr())
	}
}

func (p *Pusher) link(peer uint64) *link {
	v, _ := p.links.LoadOrStore(peer, new(link))
	return v.(*link)
}

// answerTimeout is how long a message waits for its answer before its
// stream (or unary call) is given up; the next round starts afresh.
const answerTimeout = time.Second

// unaryFor is how long a peer that does not serve the stream (an older
// binary, during a rolling upgrade) is sent unary calls before the
// stream is tried again (it may have been upgraded since).
const unaryFor = 30 * time.Second

// link is the side transport to one peer: one stream kept open across
// rounds, with at most one message on its way (busy). A unary call per
// message cost a third more CPU on both nodes, most of an idle node's.
type link struct {
	busy atomic.Bool
	// The rest belongs to the goroutine that set busy.
	addr   string // the stream's peer address
	stream tidekvpb.Admin_StreamClosedTimestampsClient
	cancel context.CancelFunc // ends the stream
	// unaryUntil: until then the peer is sent unary calls.
	unaryUntil time.Time
}

// exchange sends req to the peer at addr over conn and returns its
// answer, opening the stream if none is open (or the peer moved to
// another address); any error closes it.
func (l *link) exchange(ctx context.Context, conn grpc.ClientConnInterface, addr string, req *tidekvpb.ClosedTimestampsRequest) (*tidekvpb.ClosedTimestampsResponse, error) {
	if time.Now().Before(l.unaryUntil) {
		ctx, cancel := context.WithTimeout(ctx, answerTimeout)
		defer cancel()
		return tidekvpb.NewAdminClient(conn).PushClosedTimestamps(ctx, req)
	}
	if l.stream != nil && l.addr != addr {
		l.close()
	}
	if l.stream == nil {
		sctx, cancel := context.WithCancel(ctx)
		st, err := tidekvpb.NewAdminClient(conn).StreamClosedTimestamps(sctx)
		if err != nil {
			cancel()
			return nil, err
		}
		l.addr, l.stream, l.cancel = addr, st, cancel
	}
	timer := time.AfterFunc(answerTimeout, l.cancel)
	err := l.stream.Send(req)
	var resp *tidekvpb.ClosedTimestampsResponse
	if err == nil || err == io.EOF {
		// After io.EOF the stream has ended; Recv says why.
		resp, err = l.stream.Recv()
	}
	if fired := !timer.Stop(); err != nil || fired {
		l.close()
	}
	if status.Code(err) == codes.Unimplemented {
		l.unaryUntil = time.Now().Add(unaryFor)
	}
	return resp, err
}

func (l *link) close() {
	l.cancel()
	l.stream, l.cancel = nil, nil
}
