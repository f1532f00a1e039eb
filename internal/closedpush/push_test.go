package closedpush

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/clockwatch"
)

// fakeNode is node id of nodes 1-5; node 3 is cut off (unless it is the
// node), node 4 has no address. Its connections record each request and
// answer it once release is closed, with the peer's load (node ID times
// ten as CPU) and, for an exchange, a closed timestamp of range 100 plus
// the peer's ID; a peer in refuse answers Unavailable, as a node behind
// an injected partition does.
type fakeNode struct {
	id        uint64
	release   chan struct{}
	refuse    map[string]bool
	delayFrom time.Duration

	mu      sync.Mutex
	sent    []sent
	applied []uint64 // range IDs of the closed timestamps applied
	answers chan uint64
}

type sent struct {
	addr string
	req  *tidekvpb.ClosedTimestampsRequest
}

func newFake(id uint64) *fakeNode {
	return &fakeNode{id: id, release: make(chan struct{}), refuse: map[string]bool{}, answers: make(chan uint64, 8)}
}

var addrs = map[string]uint64{"n1": 1, "n2": 2, "n3": 3, "n5": 5}

func (n *fakeNode) ID() uint64 { return n.id }
func (n *fakeNode) Peers() []*tidekvpb.NodeDescriptor {
	return []*tidekvpb.NodeDescriptor{{NodeId: 1, GrpcAddr: "n1"}, {NodeId: 2, GrpcAddr: "n2"}, {NodeId: 3, GrpcAddr: "n3"}, {NodeId: 4}, {NodeId: 5, GrpcAddr: "n5"}}
}
func (n *fakeNode) Blocked(peer uint64) bool                  { return peer == 3 && n.id != 3 }
func (n *fakeNode) Delay(uint64) time.Duration                { return 0 }
func (n *fakeNode) DelayFrom(uint64) time.Duration            { return n.delayFrom }
func (n *fakeNode) Conn(addr string) grpc.ClientConnInterface { return fakeConn{n, addr} }
func (n *fakeNode) Closed() map[uint64][]*tidekvpb.ClosedTimestamp {
	out := map[uint64][]*tidekvpb.ClosedTimestamp{}
	for peer := uint64(1); peer <= 5; peer++ {
		out[peer] = []*tidekvpb.ClosedTimestamp{{RangeId: 10*n.id + peer}}
	}
	return out
}
func (n *fakeNode) Load() *tidekvpb.NodeLoad {
	return &tidekvpb.NodeLoad{NodeId: n.id, Cpu: float64(10 * n.id), UnixNanos: 1}
}
func (n *fakeNode) Stamp() *tidekvpb.Timestamp { return &tidekvpb.Timestamp{WallNanos: 5} }
func (n *fakeNode) Begin() clockwatch.Sample   { return clockwatch.Sample{} }
func (n *fakeNode) Answered(peer uint64, _ clockwatch.Sample, _ time.Time, _ *tidekvpb.ClosedTimestampsResponse) bool {
	n.answers <- peer
	return true
}
func (n *fakeNode) Estimate(peer uint64) *tidekvpb.OffsetEstimate {
	return &tidekvpb.OffsetEstimate{OffsetNanos: int64(peer)}
}
func (n *fakeNode) Apply(closed []*tidekvpb.ClosedTimestamp) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ct := range closed {
		n.applied = append(n.applied, ct.GetRangeId())
	}
}

type fakeConn struct {
	n    *fakeNode
	addr string
}

func (c fakeConn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	req := args.(*tidekvpb.ClosedTimestampsRequest)
	c.n.mu.Lock()
	c.n.sent = append(c.n.sent, sent{c.addr, req})
	c.n.mu.Unlock()
	if c.n.refuse[c.addr] {
		return status.Error(codes.Unavailable, "cut off by an injected partition")
	}
	<-c.n.release
	peer := addrs[c.addr]
	resp := reply.(*tidekvpb.ClosedTimestampsResponse)
	resp.Load = &tidekvpb.NodeLoad{NodeId: peer, Cpu: float64(10 * peer), UnixNanos: 1}
	if req.GetExchange() {
		resp.Closed = []*tidekvpb.ClosedTimestamp{{RangeId: 100 + peer}}
	}
	return nil
}

func (c fakeConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	panic("no streams")
}

// sentTo waits for want requests in all and returns them by address.
func (n *fakeNode) sentTo(t *testing.T, want int) map[string][]*tidekvpb.ClosedTimestampsRequest {
	t.Helper()
	for {
		n.mu.Lock()
		if len(n.sent) >= want {
			out := map[string][]*tidekvpb.ClosedTimestampsRequest{}
			for _, s := range n.sent {
				out[s.addr] = append(out[s.addr], s.req)
			}
			n.mu.Unlock()
			return out
		}
		n.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// idle waits until no exchange with peers is on its way.
func idle(p *Pusher, peers ...uint64) {
	for _, peer := range peers {
		for p.pushing(peer).Load() {
			time.Sleep(time.Millisecond)
		}
	}
}

func (n *fakeNode) appliedRanges() []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]uint64(nil), n.applied...)
}

func loads(p *Pusher) map[uint64]float64 {
	got := map[uint64]float64{}
	for _, l := range p.Loads() {
		got[l.GetNodeId()] = l.GetCpu()
	}
	return got
}

// Node 1 starts one exchange with each reachable peer (every peer has a
// higher ID; not itself, not node 3 cut off, not node 4 without an
// address), carrying its closed timestamps for that peer, its load, a clock
// stamp and its latest estimate of the peer's clock; a peer still answering
// the previous exchange is skipped; each answer's closed timestamps are
// applied and its load kept: both directions from one call.
func TestExchangeBothWays(t *testing.T) {
	n := newFake(1)
	stop := make(chan struct{})
	defer close(stop)
	p := New(n, stop)
	p.Round(context.Background())
	n.sentTo(t, 2)
	// Both exchanges are held: a second round skips both peers.
	p.Round(context.Background())
	close(n.release)
	got := map[uint64]bool{}
	for range 2 {
		got[<-n.answers] = true
	}
	if !got[2] || !got[5] {
		t.Fatalf("answers from %v, want nodes 2 and 5", got)
	}
	select {
	case peer := <-n.answers:
		t.Fatalf("a third answer, from node %d: a busy peer was pushed again", peer)
	case <-time.After(50 * time.Millisecond):
	}
	sent := n.sentTo(t, 2)
	if len(sent) != 2 || len(sent["n2"]) != 1 || len(sent["n5"]) != 1 {
		t.Fatalf("sent to %v, want one exchange each with n2 and n5", sent)
	}
	for addr, reqs := range sent {
		req, peer := reqs[0], addrs[addr]
		if req.GetFromNodeId() != 1 || !req.GetExchange() || len(req.GetClosed()) != 1 || req.GetClosed()[0].GetRangeId() != 10+peer ||
			req.GetLoad().GetCpu() != 10 || req.GetHlc().GetWallNanos() != 5 || req.GetOffset().GetOffsetNanos() != int64(peer) {
			t.Fatalf("sent %v to %s, want an exchange with its closed timestamps, the load, a stamp and the offset estimate", req, addr)
		}
	}
	for len(n.appliedRanges()) < 2 || len(loads(p)) < 3 {
		time.Sleep(time.Millisecond)
	}
	if a := n.appliedRanges(); len(a) != 2 || a[0]+a[1] != 102+105 {
		t.Fatalf("applied ranges %v, want 102 and 105 from the answers", a)
	}
	if l := loads(p); len(l) != 3 || l[1] != 10 || l[2] != 20 || l[5] != 50 {
		t.Fatalf("loads %v, want nodes 1, 2 and 5", l)
	}
}

// Node 3 starts exchanges only with higher IDs (node 5; 4 has no
// address): nodes 1 and 2 start theirs with it. A peer heard pushing
// without exchange (a binary from before it, which answers without closed
// timestamps) gets this node's pushes whatever its ID, until it is heard
// exchanging.
func TestLowerIDInitiates(t *testing.T) {
	n := newFake(3)
	close(n.release)
	stop := make(chan struct{})
	defer close(stop)
	p := New(n, stop)
	total := 0
	round := func(want int) map[string][]*tidekvpb.ClosedTimestampsRequest {
		p.Round(context.Background())
		for range want {
			<-n.answers
		}
		total += want
		idle(p, 2, 5)
		return n.sentTo(t, total)
	}
	if s := round(1); len(s) != 1 || len(s["n5"]) != 1 {
		t.Fatalf("sent to %v, want node 5 only", s)
	}
	p.Heard(&tidekvpb.ClosedTimestampsRequest{FromNodeId: 2, Load: &tidekvpb.NodeLoad{NodeId: 2, UnixNanos: 1}})
	if s := round(2); len(s["n2"]) != 1 || len(s["n5"]) != 2 || len(s["n1"]) != 0 {
		t.Fatalf("after an old push from node 2: sent to %v, want nodes 5 and 2", s)
	}
	p.Heard(&tidekvpb.ClosedTimestampsRequest{FromNodeId: 2, Exchange: true})
	if s := round(1); len(s["n2"]) != 1 || len(s["n5"]) != 3 {
		t.Fatalf("after an exchange from node 2: sent to %v, want node 5 only", s)
	}
	for len(loads(p)) < 3 {
		time.Sleep(time.Millisecond)
	}
	if l := loads(p); len(l) != 3 || l[2] != 20 || l[3] != 30 || l[5] != 50 {
		t.Fatalf("loads %v, want nodes 2, 3 and 5", l)
	}
}

// A peer that refuses the exchange (an injected partition on its side)
// delivers nothing either way, and is tried again the next round; one cut
// off on this side is never called. An answer's closed timestamps wait out
// the emulated latency back before they are applied, while the next
// exchange may start.
func TestPartitionAndDelay(t *testing.T) {
	n := newFake(1)
	n.refuse["n2"] = true
	n.delayFrom = time.Hour
	close(n.release)
	stop := make(chan struct{})
	p := New(n, stop)
	p.Round(context.Background())
	<-n.answers // node 5's
	n.sentTo(t, 2)
	idle(p, 2, 5)
	p.Round(context.Background())
	<-n.answers
	s := n.sentTo(t, 4)
	if len(s["n2"]) != 2 || len(s["n5"]) != 2 || len(s["n3"]) != 0 {
		t.Fatalf("sent to %v, want two rounds to nodes 2 and 5, none to 3", s)
	}
	if a, l := n.appliedRanges(), loads(p); len(a) != 0 || len(l) != 1 {
		t.Fatalf("applied %v, loads %v: want nothing from a refusal or an answer still on its way", a, l)
	}
	close(stop) // the delayed answers are dropped with the node
}

// Note keeps each node's newest load: an older one never replaces it.
func TestNoteKeepsTheNewest(t *testing.T) {
	p := New(newFake(1), nil)
	p.Note(&tidekvpb.NodeLoad{NodeId: 2, Cpu: 1, UnixNanos: 20})
	p.Note(&tidekvpb.NodeLoad{NodeId: 2, Cpu: 2, UnixNanos: 10})
	p.Note(&tidekvpb.NodeLoad{Cpu: 3, UnixNanos: 30}) // no node: ignored
	p.Note(nil)
	if ls := p.Loads(); len(ls) != 1 || ls[0].GetCpu() != 1 {
		t.Fatalf("loads %v, want node 2's newest only", ls)
	}
}
