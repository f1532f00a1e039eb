package kvstream

import (
	"context"
	"errors"
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

// Requests of one message with the same priority and timeout share one
// deadline, which ends only when the message has started all of them and
// every one is answered: an early answer does not end a later request's
// context, and the last one frees the timer.
func TestDeadlineSharedUntilLastAnswer(t *testing.T) {
	at := time.Now()
	a := arrivals{ctx: context.Background(), at: at, n: 5}
	c1, d1 := a.within(admission.Normal, 1000)
	d1.release() // the first request is answered before the second starts
	c2, d2 := a.within(admission.Normal, 1000)
	if d2 != d1 || c2 != c1 {
		t.Fatal("same priority and timeout: want one shared deadline")
	}
	if err := c2.Err(); err != nil {
		t.Fatalf("the first answer ended the second request's context: %v", err)
	}
	if dl, ok := c2.Deadline(); !ok || !dl.Equal(at.Add(time.Second)) {
		t.Fatalf("deadline %v (%v), want the arrival plus the timeout, %v", dl, ok, at.Add(time.Second))
	}
	c3, d3 := a.within(admission.Normal, 2000)
	c4, d4 := a.within(admission.High, 1000)
	if d3 == d1 || d4 == d1 || c3 == c1 || c4 == c1 {
		t.Fatal("another timeout or priority: want a deadline of its own")
	}
	if c0, d0 := a.within(admission.Normal, 0); d0 != nil {
		t.Fatal("no timeout: want no deadline")
	} else if _, ok := c0.Deadline(); ok {
		t.Fatal("no timeout: want a context without a deadline")
	}
	a.release() // every request of the message has started
	if err := c1.Err(); err != nil {
		t.Fatalf("ended while its second request runs: %v", err)
	}
	d2.release()
	d3.release()
	d4.release()
	for i, c := range []context.Context{c1, c3, c4} {
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("deadline %d after its last answer: %v, want cancelled", i, c.Err())
		}
	}
}

// deadlineKV records the deadline of every Put's context, and whether it
// had ended when the handler ran.
type deadlineKV struct {
	fakeKV
	mu        sync.Mutex
	deadlines []time.Time
	ended     int
}

func (k *deadlineKV) Put(ctx context.Context, req *tidekvpb.PutRequest) (*tidekvpb.PutResponse, error) {
	dl, _ := ctx.Deadline()
	k.mu.Lock()
	k.deadlines = append(k.deadlines, dl)
	if ctx.Err() != nil {
		k.ended++
	}
	k.mu.Unlock()
	return &tidekvpb.PutResponse{}, nil
}

// A request's timeout counts from its message's arrival, and every
// request of the message runs within it, whether or not it shares the
// deadline with another.
func TestRequestsRunWithinTheirTimeout(t *testing.T) {
	node, kv, st := &fakeNode{}, &deadlineKV{}, newFakeStream(t)
	stop := make(chan struct{})
	defer close(stop)
	s := New(node, kv, 4<<20, stop)
	reqs := []*tidekvpb.KVRequest{put(1, "a"), put(2, "b"), put(3, "c")}
	for i, r := range reqs {
		r.TimeoutMs = []uint32{5000, 5000, 7000}[i]
	}
	before := time.Now()
	st.in <- &tidekvpb.KVBatchRequest{Requests: reqs}
	close(st.in)
	if err := s.Serve(st); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if n := len(st.answers(t)); n != 3 {
		t.Fatalf("%d answers, want 3", n)
	}
	if kv.ended != 0 {
		t.Fatalf("%d requests ran with their context ended", kv.ended)
	}
	var at5, at7 int
	for _, dl := range kv.deadlines {
		switch {
		case !dl.Before(before.Add(5*time.Second)) && !dl.After(after.Add(5*time.Second)):
			at5++
		case !dl.Before(before.Add(7*time.Second)) && !dl.After(after.Add(7*time.Second)):
			at7++
		}
	}
	if at5 != 2 || at7 != 1 {
		t.Fatalf("deadlines %v (read between %v and %v): want two 5 s and one 7 s after the arrival", kv.deadlines, before, after)
	}
}
