package closedpush

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/clockwatch"
)

// fakeNode is node 1 of nodes 1-4; node 3 is cut off, node 4 has no
// address. Its connections answer a push with the peer's load (node ID
// times ten as CPU) once release is closed, and record what was sent.
type fakeNode struct {
	release chan struct{}
	mu      sync.Mutex
	sent    map[string]*tidekvpb.ClosedTimestampsRequest
	answers chan uint64
}

func (n *fakeNode) ID() uint64 { return 1 }
func (n *fakeNode) Peers() []*tidekvpb.NodeDescriptor {
	return []*tidekvpb.NodeDescriptor{{NodeId: 1, GrpcAddr: "n1"}, {NodeId: 2, GrpcAddr: "n2"}, {NodeId: 3, GrpcAddr: "n3"}, {NodeId: 4}}
}
func (n *fakeNode) Blocked(peer uint64) bool                  { return peer == 3 }
func (n *fakeNode) Delay(uint64) time.Duration                { return 0 }
func (n *fakeNode) Conn(addr string) grpc.ClientConnInterface { return fakeConn{n, addr} }
func (n *fakeNode) Closed() map[uint64][]*tidekvpb.ClosedTimestamp {
	return map[uint64][]*tidekvpb.ClosedTimestamp{2: {{RangeId: 7}}}
}
func (n *fakeNode) Load() *tidekvpb.NodeLoad {
	return &tidekvpb.NodeLoad{NodeId: 1, Cpu: 10, UnixNanos: 1}
}
func (n *fakeNode) Stamp() *tidekvpb.Timestamp { return &tidekvpb.Timestamp{WallNanos: 5} }
func (n *fakeNode) Begin() clockwatch.Sample   { return clockwatch.Sample{} }
func (n *fakeNode) Answered(peer uint64, _ clockwatch.Sample, _ time.Time, _ *tidekvpb.ClosedTimestampsResponse) {
	n.answers <- peer
}

type fakeConn struct {
	n    *fakeNode
	addr string
}

func (c fakeConn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	c.n.mu.Lock()
	c.n.sent[c.addr] = args.(*tidekvpb.ClosedTimestampsRequest)
	c.n.mu.Unlock()
	<-c.n.release
	reply.(*tidekvpb.ClosedTimestampsResponse).Load = &tidekvpb.NodeLoad{NodeId: 2, Cpu: 20, UnixNanos: 1}
	return nil
}

func (c fakeConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	panic("no streams")
}

// A round sends one message to each reachable peer (not itself, not one
// cut off, not one without an address) with its closed timestamps, its
// load and a clock stamp; a peer still answering the previous round is
// skipped; the answers' loads are kept beside the node's own.
func TestRound(t *testing.T) {
	n := &fakeNode{release: make(chan struct{}), sent: map[string]*tidekvpb.ClosedTimestampsRequest{}, answers: make(chan uint64, 4)}
	stop := make(chan struct{})
	defer close(stop)
	p := New(n, stop)
	p.Round(context.Background())
	// n2's message is held: a second round skips it.
	for n.sentTo() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.Round(context.Background())
	close(n.release)
	if peer := <-n.answers; peer != 2 {
		t.Fatalf("answer from node %d, want 2", peer)
	}
	select {
	case peer := <-n.answers:
		t.Fatalf("a second answer, from node %d: the busy peer was pushed again", peer)
	case <-time.After(50 * time.Millisecond):
	}
	n.mu.Lock()
	req := n.sent["n2"]
	if len(n.sent) != 1 || req == nil || req.GetFromNodeId() != 1 || len(req.GetClosed()) != 1 || req.GetLoad().GetCpu() != 10 || req.GetHlc().GetWallNanos() != 5 {
		t.Fatalf("sent %v, want one message to n2 with its closed timestamps, the load and a stamp", n.sent)
	}
	n.mu.Unlock()
	got := map[uint64]float64{}
	for _, l := range p.Loads() {
		got[l.GetNodeId()] = l.GetCpu()
	}
	if len(got) != 2 || got[1] != 10 || got[2] != 20 {
		t.Fatalf("loads %v, want nodes 1 and 2", got)
	}
}

func (n *fakeNode) sentTo() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.sent)
}

// Note keeps each node's newest load: an older one never replaces it.
func TestNoteKeepsTheNewest(t *testing.T) {
	p := New(&fakeNode{}, nil)
	p.Note(&tidekvpb.NodeLoad{NodeId: 2, Cpu: 1, UnixNanos: 20})
	p.Note(&tidekvpb.NodeLoad{NodeId: 2, Cpu: 2, UnixNanos: 10})
	p.Note(&tidekvpb.NodeLoad{Cpu: 3, UnixNanos: 30}) // no node: ignored
	p.Note(nil)
	if ls := p.Loads(); len(ls) != 1 || ls[0].GetCpu() != 1 {
		t.Fatalf("loads %v, want node 2's newest only", ls)
	}
}
