package kvstream

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/security"
)

// fakeNode refuses writes of the key "no" and counts what it is told.
type fakeNode struct {
	messages, requests atomic.Int64
}

func (n *fakeNode) Identify(context.Context) (security.Identity, error) {
	return security.Identity{User: "u"}, nil
}
func (n *fakeNode) Clock() *hlc.Clock {
	c, err := hlc.NewClock(wallClock{}, hlc.DefaultMaxOffset)
	if err != nil {
		panic(err)
	}
	return c
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (n *fakeNode) Received(msg *tidekvpb.KVBatchRequest) {
	n.messages.Add(1)
	n.requests.Add(int64(len(msg.GetRequests())))
}
func (n *fakeNode) Priority(p tidekvpb.Priority) admission.Priority { return admission.Normal }
func (n *fakeNode) Refuse(id security.Identity, req *tidekvpb.KVRequest, p admission.Priority) *tidekvpb.KVResponse {
	if string(req.GetPut().GetKey()) == "no" {
		return &tidekvpb.KVResponse{Id: req.GetId(), ErrorCode: uint32(codes.PermissionDenied), ErrorMessage: id.User + " may not write"}
	}
	return nil
}

// fakeKV answers a Get with a value of the key's length in bytes, after
// hold (if set) is closed; started counts the calls begun.
type fakeKV struct {
	tidekvpb.UnimplementedKVServer
	hold    chan struct{}
	started atomic.Int64
}

func (k *fakeKV) Get(ctx context.Context, req *tidekvpb.GetRequest) (*tidekvpb.GetResponse, error) {
	k.started.Add(1)
	if k.hold != nil {
		<-k.hold
	}
	return &tidekvpb.GetResponse{Found: true, Value: make([]byte, len(req.GetKey()))}, nil
}

func (k *fakeKV) Put(ctx context.Context, req *tidekvpb.PutRequest) (*tidekvpb.PutResponse, error) {
	return &tidekvpb.PutResponse{}, nil
}

// fakeStream is the server side of a stream: in carries the client's
// messages (closed: the client ended it), sent records the node's.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	in   chan *tidekvpb.KVBatchRequest
	mu   sync.Mutex
	sent []*tidekvpb.KVBatchResponse
}

func newFakeStream(t *testing.T) *fakeStream {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &fakeStream{ctx: ctx, in: make(chan *tidekvpb.KVBatchRequest, 16)}
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) Recv() (*tidekvpb.KVBatchRequest, error) {
	select {
	case m, ok := <-f.in:
		if !ok {
			return nil, io.EOF
		}
		return m, nil
	case <-f.ctx.Done():
		return nil, f.ctx.Err()
	}
}

func (f *fakeStream) Send(m *tidekvpb.KVBatchResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, m)
	return nil
}

// answers is every answer sent, by id; a second answer to an id fails t.
func (f *fakeStream) answers(t *testing.T) map[uint64]*tidekvpb.KVResponse {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[uint64]*tidekvpb.KVResponse{}
	for _, m := range f.sent {
		for _, a := range m.GetResponses() {
			if _, dup := out[a.GetId()]; dup {
				t.Fatalf("request %d answered twice", a.GetId())
			}
			out[a.GetId()] = a
		}
	}
	return out
}

func get(id uint64, key string) *tidekvpb.KVRequest {
	return &tidekvpb.KVRequest{Id: id, Request: &tidekvpb.KVRequest_Get{Get: &tidekvpb.GetRequest{Key: []byte(key)}}}
}

func put(id uint64, key string) *tidekvpb.KVRequest {
	return &tidekvpb.KVRequest{Id: id, Request: &tidekvpb.KVRequest_Put{Put: &tidekvpb.PutRequest{Key: []byte(key), Value: []byte("v")}}}
}

// Every request of a message is answered once, by id: a write the node
// refuses with the node's answer, the rest by the unary handlers; the
// node is told of each message read; a client that ends the stream ends
// Serve without an error.
func TestAnswersEachRequestOnce(t *testing.T) {
	node, kv, st := &fakeNode{}, &fakeKV{}, newFakeStream(t)
	stop := make(chan struct{})
	defer close(stop)
	s := New(node, kv, 4<<20, stop)
	st.in <- &tidekvpb.KVBatchRequest{Requests: []*tidekvpb.KVRequest{put(1, "a"), put(2, "no"), get(3, "abc")}}
	st.in <- &tidekvpb.KVBatchRequest{Requests: []*tidekvpb.KVRequest{get(4, "ab")}}
	close(st.in)
	if err := s.Serve(st); err != nil {
		t.Fatalf("Serve after the client ended the stream: %v", err)
	}
	ans := st.answers(t)
	if len(ans) != 4 {
		t.Fatalf("%d answers, want 4: %v", len(ans), ans)
	}
	if a := ans[1]; a.GetErrorCode() != 0 || a.GetPut() == nil {
		t.Fatalf("put: %v", a)
	}
	if a := ans[2]; codes.Code(a.GetErrorCode()) != codes.PermissionDenied || a.GetErrorMessage() != "u may not write" {
		t.Fatalf("refused put: %v, want the node's refusal", a)
	}
	if g := ans[3].GetGet(); len(g.GetValue()) != 3 {
		t.Fatalf("get: %v", ans[3])
	}
	if g := ans[4].GetGet(); len(g.GetValue()) != 2 {
		t.Fatalf("get: %v", ans[4])
	}
	if m, r := node.messages.Load(), node.requests.Load(); m != 2 || r != 4 {
		t.Fatalf("node told of %d messages, %d requests; want 2, 4", m, r)
	}
}

// Answers are grouped into messages below the send limit (less the
// framing slack); an answer larger than the limit goes alone.
func TestMessagesStayUnderTheLimit(t *testing.T) {
	node, kv, st := &fakeNode{}, &fakeKV{}, newFakeStream(t)
	stop := make(chan struct{})
	defer close(stop)
	const limit = 1000
	s := New(node, kv, limit+messageSlack, stop)
	var reqs []*tidekvpb.KVRequest
	for i := range 40 {
		reqs = append(reqs, get(uint64(i+1), strings.Repeat("k", 300)))
	}
	reqs = append(reqs, get(41, strings.Repeat("k", 3000)))
	st.in <- &tidekvpb.KVBatchRequest{Requests: reqs}
	close(st.in)
	if err := s.Serve(st); err != nil {
		t.Fatal(err)
	}
	if n := len(st.answers(t)); n != 41 {
		t.Fatalf("%d answers, want 41", n)
	}
	for _, m := range st.sent {
		size := 0
		for _, a := range m.GetResponses() {
			size += proto.Size(a)
		}
		if len(m.GetResponses()) > 1 && size > limit {
			t.Fatalf("a message of %d answers holds %d bytes, above the limit %d", len(m.GetResponses()), size, limit)
		}
	}
}

// A stream runs at most maxStreamInflight requests at once: the reader
// stops until answers are sent, and then serves the rest.
func TestInflightBound(t *testing.T) {
	node, kv, st := &fakeNode{}, &fakeKV{hold: make(chan struct{})}, newFakeStream(t)
	stop := make(chan struct{})
	defer close(stop)
	s := New(node, kv, 4<<20, stop)
	const n = maxStreamInflight + 100
	var reqs []*tidekvpb.KVRequest
	for i := range n {
		reqs = append(reqs, get(uint64(i+1), "k"))
	}
	st.in <- &tidekvpb.KVBatchRequest{Requests: reqs}
	close(st.in)
	done := make(chan error, 1)
	go func() { done <- s.Serve(st) }()
	for kv.started.Load() < maxStreamInflight {
		time.Sleep(time.Millisecond)
	}
	// Nothing is answered, so no slot is free: no request past the bound
	// may start, however long we look.
	time.Sleep(50 * time.Millisecond)
	if got := kv.started.Load(); got != maxStreamInflight {
		t.Fatalf("%d requests running with none answered, want at most %d", got, maxStreamInflight)
	}
	close(kv.hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := len(st.answers(t)); got != n {
		t.Fatalf("%d answers, want %d", got, n)
	}
}

// A stopping node ends the stream as UNAVAILABLE after answering the
// requests it started, though the client keeps it open.
func TestStopEndsStreamAfterAnswers(t *testing.T) {
	node, kv, st := &fakeNode{}, &fakeKV{hold: make(chan struct{})}, newFakeStream(t)
	stop := make(chan struct{})
	s := New(node, kv, 4<<20, stop)
	st.in <- &tidekvpb.KVBatchRequest{Requests: []*tidekvpb.KVRequest{get(1, "k")}}
	done := make(chan error, 1)
	go func() { done <- s.Serve(st) }()
	for kv.started.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	close(kv.hold)
	err := <-done
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "node is stopping") {
		t.Fatalf("Serve after stop: %v, want UNAVAILABLE", err)
	}
	if a := st.answers(t)[1]; a.GetGet() == nil {
		t.Fatalf("the started request's answer: %v", a)
	}
}
