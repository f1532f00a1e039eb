package georpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/geo"
)

// heldNode is a Node whose peer connection hands each Epoch call to the
// test and waits until the test releases it.
type heldNode struct{ calls chan heldCall }

type heldCall struct {
	msgs    []*geo.Message
	release chan struct{}
}

func (n heldNode) ID() uint64                           { return 1 }
func (n heldNode) Blocked(uint64) bool                  { return false }
func (n heldNode) Delay(uint64) time.Duration           { return 0 }
func (n heldNode) Addr(uint64) (string, bool)           { return "peer", true }
func (n heldNode) Conn(string) grpc.ClientConnInterface { return heldConn(n) }
func (n heldNode) Nodes() []*tidekvpb.NodeDescriptor    { return nil }
func (n heldNode) Ready() bool                          { return true }
func (n heldNode) RanGateway() (bool, error)            { return false, nil }
func (n heldNode) MarkGateway() error                   { return nil }

type heldConn heldNode

func (c heldConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	msgs, err := unframe(args.(*tidekvpb.GeoEpochRequest).GetBody())
	if err != nil {
		return err
	}
	call := heldCall{msgs: msgs, release: make(chan struct{})}
	c.calls <- call
	<-call.release
	return nil
}

func (c heldConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	panic("the sender makes unary calls only")
}

// While a call to a peer is in flight, the messages sent to it meanwhile
// wait and go together in the next call, in the order sent. A call per
// message, as before, had 51 calls in flight here; on a process short of
// CPU they timed out, were lost and sent again, and the gateways never
// caught up (TestGeoBankAcrossRegions at a fifth of a CPU).
func TestMessagesQueuedBehindACallGoInOne(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	n := heldNode{calls: make(chan heldCall)}
	s := newSender(n, []uint64{1, 2}, 0, stop)
	msg := func(e uint64) *geo.Message { return &geo.Message{From: 0, Genesis: 1, Epoch: e, Acks: []uint64{1, 1}} }

	s.Send(1, msg(1))
	first := <-n.calls
	for e := uint64(2); e <= 51; e++ {
		s.Send(1, msg(e))
	}
	close(first.release)
	second := <-n.calls
	close(second.release)

	var got []uint64
	for _, m := range append(first.msgs, second.msgs...) {
		got = append(got, m.Epoch)
	}
	if len(first.msgs) != 1 || len(got) != 51 {
		t.Fatalf("calls carried %d then %d messages, want 1 then 50", len(first.msgs), len(second.msgs))
	}
	for i, e := range got {
		if e != uint64(i+1) {
			t.Fatalf("epochs in the order received: %v, want 1..51 in order", got)
		}
	}
}

// A body cut short is refused whole.
func TestTruncatedBatchIsRefused(t *testing.T) {
	body, err := geo.EncodeMessage(&geo.Message{Epoch: 3, Acks: []uint64{0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	framed := append([]byte{byte(len(body))}, body...)
	if ms, err := unframe(framed); err != nil || len(ms) != 1 || ms[0].Epoch != 3 {
		t.Fatalf("one framed message: %v, %v", ms, err)
	}
	if _, err := unframe(framed[:len(framed)-1]); err == nil {
		t.Fatal("a batch cut short was taken")
	}
}

// A peer's queue holds at most maxQueued bytes: past it the oldest
// messages go and the newest stay, in order, and what take hands out is
// no longer counted.
func TestPeerQueueDropsOldestPastItsBound(t *testing.T) {
	q := &peerQueue{wake: make(chan struct{}, 1)}
	const size = 64 << 10
	now := time.Now()
	n := maxQueued/size + 10
	for i := range n {
		body := make([]byte, size)
		body[0] = byte(i)
		q.add(queued{due: now, body: body})
	}
	if q.bytes > maxQueued || len(q.q) != maxQueued/size || q.bytes != len(q.q)*size {
		t.Fatalf("%d messages, %d bytes queued after %d of %d bytes; the bound is %d", len(q.q), q.bytes, n, size, maxQueued)
	}
	if first := q.q[0].body[0]; first != byte(n-maxQueued/size) {
		t.Fatalf("the oldest kept is message %d, want %d", first, n-maxQueued/size)
	}
	for len(q.q) > 0 {
		if batch, _ := q.take(now); batch == nil {
			t.Fatal("due messages not taken")
		}
	}
	if q.bytes != 0 {
		t.Fatalf("%d bytes counted after every message was taken", q.bytes)
	}
}
