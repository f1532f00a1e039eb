package closedpush

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/clockwatch"
)

// peer is node 2 on loopback: it answers a push with its load (CPU 20),
// as a unary call or on a stream, once hold lets it (an open channel
// holds every answer; close it to let them go), and counts what it saw.
type peer struct {
	tidekvpb.UnimplementedAdminServer
	hold chan struct{}
	mu   sync.Mutex
	sent []*tidekvpb.ClosedTimestampsRequest
	// streams opened, unary calls taken
	streams, unary int
}

func (p *peer) answer(ctx context.Context, req *tidekvpb.ClosedTimestampsRequest) (*tidekvpb.ClosedTimestampsResponse, error) {
	p.mu.Lock()
	p.sent = append(p.sent, req)
	hold := p.hold
	p.mu.Unlock()
	select {
	case <-hold:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &tidekvpb.ClosedTimestampsResponse{Load: &tidekvpb.NodeLoad{NodeId: 2, Cpu: 20, UnixNanos: 1}}, nil
}

func (p *peer) PushClosedTimestamps(ctx context.Context, req *tidekvpb.ClosedTimestampsRequest) (*tidekvpb.ClosedTimestampsResponse, error) {
	p.count(&p.unary)
	return p.answer(ctx, req)
}

func (p *peer) StreamClosedTimestamps(st grpc.BidiStreamingServer[tidekvpb.ClosedTimestampsRequest, tidekvpb.ClosedTimestampsResponse]) error {
	p.count(&p.streams)
	for {
		req, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := p.answer(st.Context(), req)
		if err != nil {
			return err
		}
		if err := st.Send(resp); err != nil {
			return err
		}
	}
}

func (p *peer) count(c *int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	*c++
}

// seen is how many streams and unary calls the peer took and the
// messages it was sent.
func (p *peer) seen() (streams, unary, sent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streams, p.unary, len(p.sent)
}

// older is node 2 running a binary without the stream: unary calls only.
type older struct{ *peer }

func (older) StreamClosedTimestamps(st grpc.BidiStreamingServer[tidekvpb.ClosedTimestampsRequest, tidekvpb.ClosedTimestampsResponse]) error {
	return tidekvpb.UnimplementedAdminServer{}.StreamClosedTimestamps(st)
}

// serve runs srv as node 2 on loopback and returns a connection to it.
func serve(t *testing.T, srv tidekvpb.AdminServer) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	tidekvpb.RegisterAdminServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// fakeNode is node 1 of nodes 1-4; node 2 is reached through conn, node
// 3 is cut off, node 4 has no address. Answers arrive on answers.
type fakeNode struct {
	conn    grpc.ClientConnInterface
	answers chan uint64
}

func (n *fakeNode) ID() uint64 { return 1 }
func (n *fakeNode) Peers() []*tidekvpb.NodeDescriptor {
	return []*tidekvpb.NodeDescriptor{{NodeId: 1, GrpcAddr: "n1"}, {NodeId: 2, GrpcAddr: "n2"}, {NodeId: 3, GrpcAddr: "n3"}, {NodeId: 4}}
}
func (n *fakeNode) Blocked(peer uint64) bool   { return peer == 3 }
func (n *fakeNode) Delay(uint64) time.Duration { return 0 }
func (n *fakeNode) Conn(addr string) grpc.ClientConnInterface {
	if addr != "n2" {
		panic("a push to " + addr)
	}
	return n.conn
}
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

func newPusher(t *testing.T, srv tidekvpb.AdminServer) (*Pusher, *fakeNode) {
	n := &fakeNode{conn: serve(t, srv), answers: make(chan uint64, 4)}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return New(n, stop), n
}

// idle waits until no message to node 2 is on its way.
func idle(p *Pusher) {
	for p.link(2).busy.Load() {
		time.Sleep(time.Millisecond)
	}
}

// A round sends one message to each reachable peer (not itself, not one
// cut off, not one without an address) with its closed timestamps, its
// load and a clock stamp; a peer still answering the previous round is
// skipped; the answers' loads are kept beside the node's own.
func TestRound(t *testing.T) {
	srv := &peer{hold: make(chan struct{})}
	p, n := newPusher(t, srv)
	p.Round(context.Background())
	// n2's message is held: a second round skips it.
	for _, _, sent := srv.seen(); sent == 0; _, _, sent = srv.seen() {
		time.Sleep(time.Millisecond)
	}
	p.Round(context.Background())
	close(srv.hold)
	if peer := <-n.answers; peer != 2 {
		t.Fatalf("answer from node %d, want 2", peer)
	}
	idle(p)
	if _, _, sent := srv.seen(); sent != 1 {
		t.Fatalf("%d messages sent, want 1: the busy peer was pushed again", sent)
	}
	srv.mu.Lock()
	req := srv.sent[0]
	srv.mu.Unlock()
	if req.GetFromNodeId() != 1 || len(req.GetClosed()) != 1 || req.GetLoad().GetCpu() != 10 || req.GetHlc().GetWallNanos() != 5 {
		t.Fatalf("sent %v, want node 1's closed timestamps for n2, the load and a stamp", req)
	}
	got := map[uint64]float64{}
	for _, l := range p.Loads() {
		got[l.GetNodeId()] = l.GetCpu()
	}
	if len(got) != 2 || got[1] != 10 || got[2] != 20 {
		t.Fatalf("loads %v, want nodes 1 and 2", got)
	}
}

// Rounds share one stream per peer: every message is answered on it, and
// no unary call is made.
func TestRoundsShareOneStream(t *testing.T) {
	srv := &peer{hold: make(chan struct{})}
	close(srv.hold)
	p, n := newPusher(t, srv)
	for range 5 {
		p.Round(context.Background())
		<-n.answers
		idle(p)
	}
	if streams, unary, sent := srv.seen(); streams != 1 || unary != 0 || sent != 5 {
		t.Fatalf("%d streams, %d unary calls, %d messages; want 5 messages on 1 stream", streams, unary, sent)
	}
}

// An answer that takes longer than answerTimeout ends the stream; the
// next round opens another.
func TestStalledStreamIsReplaced(t *testing.T) {
	srv := &peer{hold: make(chan struct{})}
	p, n := newPusher(t, srv)
	p.Round(context.Background())
	idle(p) // given up after answerTimeout
	srv.mu.Lock()
	close(srv.hold)
	srv.mu.Unlock()
	p.Round(context.Background())
	<-n.answers
	idle(p)
	if streams, unary, sent := srv.seen(); streams != 2 || unary != 0 || sent != 2 {
		t.Fatalf("%d streams, %d unary calls, %d messages; want 2 streams, a message on each", streams, unary, sent)
	}
}

// A peer without the stream (an older binary) is sent unary calls from
// the next round on, and the stream is tried again after unaryFor.
func TestOlderPeerGetsUnaryCalls(t *testing.T) {
	srv := &peer{hold: make(chan struct{})}
	close(srv.hold)
	p, n := newPusher(t, older{srv})
	p.Round(context.Background()) // the stream is refused: no answer
	idle(p)
	for range 3 {
		p.Round(context.Background())
		<-n.answers
		idle(p)
	}
	if _, unary, sent := srv.seen(); unary != 3 || sent != 3 {
		t.Fatalf("%d unary calls, %d messages; want 3 of each", unary, sent)
	}
	p.link(2).unaryUntil = time.Now() // unaryFor has passed
	p.Round(context.Background())
	idle(p)
	if _, unary, _ := srv.seen(); unary != 3 {
		t.Fatalf("%d unary calls after unaryFor, want the stream tried (3 calls still)", unary)
	}
	if !time.Now().Before(p.link(2).unaryUntil) {
		t.Fatal("the refused stream did not restart the unary period")
	}
}

// Note keeps each node's newest load: an older one never replaces it.
func TestNoteKeepsTheNewest(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	p := New(&fakeNode{}, stop)
	p.Note(&tidekvpb.NodeLoad{NodeId: 2, Cpu: 1, UnixNanos: 20})
	p.Note(&tidekvpb.NodeLoad{NodeId: 2, Cpu: 2, UnixNanos: 10})
	p.Note(&tidekvpb.NodeLoad{Cpu: 3, UnixNanos: 30}) // no node: ignored
	p.Note(nil)
	if ls := p.Loads(); len(ls) != 1 || ls[0].GetCpu() != 1 {
		t.Fatalf("loads %v, want node 2's newest only", ls)
	}
}
