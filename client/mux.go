package client

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// muxKV sends a client's KV requests to one node on a KV.Batch stream
// (docs/batch-rpc.md): the requests that are ready together travel in one
// message, their answers come back by id, several per message. It
// implements tidekvpb.KVClient, so the retry loop is unchanged; every
// request still passes the node's interceptor (round trips, in-flight
// window, emulated latency). A node without Batch (an older binary) and
// requests too large to share a message go as unary calls.
type muxKV struct {
	unary     tidekvpb.KVClient // over a conn that applies intercept itself
	intercept grpc.UnaryClientInterceptor
	clock     *hlc.Clock // stamps every message, updated by every answer
	open      func() (tidekvpb.KV_BatchClient, context.CancelFunc, error)

	mu      sync.Mutex
	cur     *muxStream
	opening *muxOpening // the stream being opened, if any
	off     bool        // the node answered Unimplemented: unary from now on
}

// muxOpening is a stream being opened, which callers wait for within
// their own deadlines (opening waits for the connection).
type muxOpening struct {
	done chan struct{}
	s    *muxStream
	err  error
}

// maxMuxRequest is the largest request sent on the stream; larger ones
// gain nothing from sharing a message and would hold up the small ones
// behind them. maxMuxMessage caps one message well below the smallest
// message limit a node accepts (--grpc-max-message-size, at least 1 MiB).
const (
	maxMuxRequest = 64 << 10
	maxMuxMessage = 512 << 10
)

// deadlineGrace is how much longer than its caller a node gives a request.
const deadlineGrace = 10 * time.Millisecond

// errNoBatch: the node does not serve Batch and did nothing with the
// request; send it as a unary call.
var errNoBatch = errors.New("tidekv: node does not serve KV.Batch")

// notSentMessage marks the status of a request that never left the client
// (neverSent): its stream broke before the request was written.
const notSentMessage = "request not sent: no stream to the node"

func newMuxKV(cc *grpc.ClientConn, intercept grpc.UnaryClientInterceptor, ctx context.Context, md metadata.MD, clock *hlc.Clock) *muxKV {
	kv := tidekvpb.NewKVClient(cc)
	return &muxKV{unary: kv, intercept: intercept, clock: clock, open: func() (tidekvpb.KV_BatchClient, context.CancelFunc, error) {
		sctx, cancel := context.WithCancel(ctx)
		if md != nil {
			sctx = metadata.NewOutgoingContext(sctx, md)
		}
		s, err := kv.Batch(sctx)
		if err != nil {
			cancel()
			return nil, nil, err
		}
		return s, cancel, nil
	}}
}

// call runs one request: on the stream through the interceptor, or as the
// unary call viaUnary (whose conn applies the interceptor).
func (m *muxKV) call(ctx context.Context, method string, req *tidekvpb.KVRequest, got func(*tidekvpb.KVResponse), viaUnary func() error) error {
	m.mu.Lock()
	off := m.off
	m.mu.Unlock()
	if off || proto.Size(req) > maxMuxRequest {
		return viaUnary()
	}
	err := m.intercept(ctx, method, nil, nil, nil, func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		resp, err := m.roundTrip(ctx, req)
		if err != nil {
			return err
		}
		if resp.GetErrorCode() != 0 {
			return answerStatus(resp)
		}
		got(resp)
		return nil
	})
	if errors.Is(err, errNoBatch) {
		return viaUnary()
	}
	return err
}

// answerStatus rebuilds the status a unary call would have returned.
func answerStatus(resp *tidekvpb.KVResponse) error {
	st := status.New(codes.Code(resp.GetErrorCode()), resp.GetErrorMessage())
	if d := resp.GetErrorDetail(); d != nil {
		if wd, err := st.WithDetails(d); err == nil {
			st = wd
		}
	}
	return st.Err()
}

// roundTrip sends req on the node's stream and waits for its answer.
func (m *muxKV) roundTrip(ctx context.Context, req *tidekvpb.KVRequest) (*tidekvpb.KVResponse, error) {
	if dl, ok := ctx.Deadline(); ok {
		// A little later than the caller's deadline: the caller, not the
		// node, decides when it gave up (its error says so), and the node
		// stops working on it soon after.
		req.TimeoutMs = uint32(max((time.Until(dl) + deadlineGrace + time.Millisecond - 1).Milliseconds(), 1))
	}
	if v := metadata.ValueFromOutgoingContext(ctx, PriorityHeader); len(v) > 0 {
		req.Priority = tidekvpb.Priority(tidekvpb.Priority_value[v[0]])
	}
	s, err := m.stream(ctx)
	if err != nil {
		return nil, err
	}
	c := &muxCall{req: req, done: make(chan struct{})}
	if !s.enqueue(c) {
		// Broke before we got in: nothing was sent.
		m.drop(s)
		return nil, s.failure(false)
	}
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
		s.forget(c)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// stream returns the node's stream, opening one if there is none.
func (m *muxKV) stream(ctx context.Context) (*muxStream, error) {
	m.mu.Lock()
	if m.off {
		m.mu.Unlock()
		return nil, errNoBatch
	}
	if s := m.cur; s != nil {
		m.mu.Unlock()
		return s, nil
	}
	o := m.opening
	if o == nil {
		o = &muxOpening{done: make(chan struct{})}
		m.opening = o
		go m.openStream(o)
	}
	m.mu.Unlock()
	select {
	case <-o.done:
		return o.s, o.err
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// openStream opens a stream and starts its sender and receiver. A failure
// to open sent nothing.
func (m *muxKV) openStream(o *muxOpening) {
	bs, cancel, err := m.open()
	m.mu.Lock()
	m.opening = nil
	if err == nil {
		o.s = &muxStream{m: m, stream: bs, cancel: cancel, waiting: make(map[uint64]*muxCall),
			wake: make(chan struct{}, 1), dead: make(chan struct{})}
		m.cur = o.s
		go o.s.send()
		go o.s.receive()
	} else if st := status.Convert(err); st.Code() == codes.Canceled {
		o.err = err
	} else {
		o.err = status.Error(codes.Unavailable, notSentMessage+": "+st.Message())
	}
	m.mu.Unlock()
	close(o.done)
}

// drop forgets a broken stream so the next request opens a new one; after
// Unimplemented the node is asked with unary calls only.
func (m *muxKV) drop(s *muxStream) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == s {
		m.cur = nil
	}
	if status.Code(s.err) == codes.Unimplemented {
		m.off = true
	}
}

// muxCall is one request waiting on a stream.
type muxCall struct {
	req  *tidekvpb.KVRequest
	sent bool // written to the stream (guarded by the stream's mu)
	done chan struct{}
	resp *tidekvpb.KVResponse
	err  error
}

// muxStream is one open Batch stream with its sender and receiver.
type muxStream struct {
	m      *muxKV
	stream tidekvpb.KV_BatchClient
	cancel context.CancelFunc
	wake   chan struct{}
	dead   chan struct{} // closed when the stream broke

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]*muxCall
	queue   []*muxCall
	err     error // why it broke
}

// enqueue gives c an id and queues it to be sent; false if the stream has
// broken.
func (s *muxStream) enqueue(c *muxCall) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	s.nextID++
	c.req.Id = s.nextID
	s.waiting[c.req.Id] = c
	s.queue = append(s.queue, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// forget drops a call whose caller gave up: an answer that still comes is
// discarded, and an unsent request is not sent.
func (s *muxStream) forget(c *muxCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiting, c.req.GetId())
	if !c.sent {
		for i, q := range s.queue {
			if q == c {
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
				break
			}
		}
	}
}

// send writes what is queued, as few messages as the size cap allows,
// until the stream breaks.
func (s *muxStream) send() {
	for {
		select {
		case <-s.wake:
		case <-s.dead:
			return
		}
		// Let the callers that are ready to run queue their requests
		// too: under load this puts many in one message, and with no one
		// else to run it returns at once.
		runtime.Gosched()
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		for _, c := range q {
			c.sent = true
		}
		s.mu.Unlock()
		for len(q) > 0 {
			msg := &tidekvpb.KVBatchRequest{Hlc: tidekvpb.FromHLC(s.m.clock.Now())}
			size := 0
			for len(q) > 0 && (len(msg.Requests) == 0 || size < maxMuxMessage-maxMuxRequest) {
				msg.Requests = append(msg.Requests, q[0].req)
				size += proto.Size(q[0].req)
				q = q[1:]
			}
			if err := s.stream.Send(msg); err != nil {
				// The real error comes from Recv; CloseSend-style errors
				// here are io.EOF.
				s.breakWith(status.Error(codes.Unavailable, "stream to the node broke while sending: "+err.Error()))
				return
			}
		}
	}
}

// receive hands each answer to its waiter until the stream breaks.
func (s *muxStream) receive() {
	for {
		msg, err := s.stream.Recv()
		if err != nil {
			s.breakWith(err)
			return
		}
		// A node from before HLC sends none; one beyond the maximum offset
		// ahead is refused (the clock stays as it was) and the answers
		// still count.
		if ts := msg.GetHlc().HLC(); !ts.IsZero() {
			_, _ = s.m.clock.Update(ts)
		}
		s.mu.Lock()
		for _, r := range msg.GetResponses() {
			if c, ok := s.waiting[r.GetId()]; ok {
				delete(s.waiting, r.GetId())
				c.resp = r
				close(c.done)
			}
		}
		s.mu.Unlock()
	}
}

// breakWith ends the stream: every waiting call fails, those never sent
// as not sent (safe to retry anywhere), the others as a lost connection
// (their outcome is unknown).
func (s *muxStream) breakWith(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if err == nil {
		err = status.Error(codes.Unavailable, "stream to the node ended")
	}
	s.err = err
	close(s.dead)
	for id, c := range s.waiting {
		delete(s.waiting, id)
		c.err = s.failureLocked(c.sent)
		close(c.done)
	}
	s.queue = nil
	s.mu.Unlock()
	s.cancel()
	s.m.drop(s)
}

func (s *muxStream) failure(sent bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failureLocked(sent)
}

// failureLocked is what a call learns of the broken stream.
func (s *muxStream) failureLocked(sent bool) error {
	st := status.Convert(s.err)
	switch {
	case st.Code() == codes.Unimplemented:
		return errNoBatch
	case st.Code() == codes.Unauthenticated || st.Code() == codes.PermissionDenied:
		// Refused when it opened, before any request ran: every request
		// gets the node's answer.
		return st.Err()
	case !sent:
		return status.Error(codes.Unavailable, notSentMessage+": "+st.Message())
	case st.Code() == codes.Canceled || st.Code() == codes.Unavailable:
		return st.Err()
	}
	return status.Error(codes.Unavailable, "stream to the node broke: "+st.Message())
}

// The KVClient methods.

// viaMux runs one typed request through call.
func viaMux[R any](m *muxKV, ctx context.Context, method string, req *tidekvpb.KVRequest, pick func(*tidekvpb.KVResponse) R, unary func() (R, error)) (R, error) {
	var out R
	err := m.call(ctx, method, req, func(r *tidekvpb.KVResponse) { out = pick(r) }, func() (err error) { out, err = unary(); return err })
	return out, err
}

func (m *muxKV) Get(ctx context.Context, in *tidekvpb.GetRequest, opts ...grpc.CallOption) (*tidekvpb.GetResponse, error) {
	return viaMux(m, ctx, tidekvpb.KV_Get_FullMethodName, &tidekvpb.KVRequest{Request: &tidekvpb.KVRequest_Get{Get: in}},
		(*tidekvpb.KVResponse).GetGet, func() (*tidekvpb.GetResponse, error) { return m.unary.Get(ctx, in, opts...) })
}

func (m *muxKV) Put(ctx context.Context, in *tidekvpb.PutRequest, opts ...grpc.CallOption) (*tidekvpb.PutResponse, error) {
	return viaMux(m, ctx, tidekvpb.KV_Put_FullMethodName, &tidekvpb.KVRequest{Request: &tidekvpb.KVRequest_Put{Put: in}},
		(*tidekvpb.KVResponse).GetPut, func() (*tidekvpb.PutResponse, error) { return m.unary.Put(ctx, in, opts...) })
}

func (m *muxKV) Delete(ctx context.Context, in *tidekvpb.DeleteRequest, opts ...grpc.CallOption) (*tidekvpb.DeleteResponse, error) {
	return viaMux(m, ctx, tidekvpb.KV_Delete_FullMethodName, &tidekvpb.KVRequest{Request: &tidekvpb.KVRequest_Delete{Delete: in}},
		(*tidekvpb.KVResponse).GetDelete, func() (*tidekvpb.DeleteResponse, error) { return m.unary.Delete(ctx, in, opts...) })
}

func (m *muxKV) Scan(ctx context.Context, in *tidekvpb.ScanRequest, opts ...grpc.CallOption) (*tidekvpb.ScanResponse, error) {
	return viaMux(m, ctx, tidekvpb.KV_Scan_FullMethodName, &tidekvpb.KVRequest{Request: &tidekvpb.KVRequest_Scan{Scan: in}},
		(*tidekvpb.KVResponse).GetScan, func() (*tidekvpb.ScanResponse, error) { return m.unary.Scan(ctx, in, opts...) })
}

func (m *muxKV) BatchGet(ctx context.Context, in *tidekvpb.BatchGetRequest, opts ...grpc.CallOption) (*tidekvpb.BatchGetResponse, error) {
	return viaMux(m, ctx, tidekvpb.KV_BatchGet_FullMethodName, &tidekvpb.KVRequest{Request: &tidekvpb.KVRequest_BatchGet{BatchGet: in}},
		(*tidekvpb.KVResponse).GetBatchGet, func() (*tidekvpb.BatchGetResponse, error) { return m.unary.BatchGet(ctx, in, opts...) })
}

func (m *muxKV) Write(ctx context.Context, in *tidekvpb.WriteRequest, opts ...grpc.CallOption) (*tidekvpb.WriteResponse, error) {
	return viaMux(m, ctx, tidekvpb.KV_Write_FullMethodName, &tidekvpb.KVRequest{Request: &tidekvpb.KVRequest_Write{Write: in}},
		(*tidekvpb.KVResponse).GetWrite, func() (*tidekvpb.WriteResponse, error) { return m.unary.Write(ctx, in, opts...) })
}

func (m *muxKV) CompareAndSet(ctx context.Context, in *tidekvpb.CompareAndSetRequest, opts ...grpc.CallOption) (*tidekvpb.CompareAndSetResponse, error) {
	return viaMux(m, ctx, tidekvpb.KV_CompareAndSet_FullMethodName, &tidekvpb.KVRequest{Request: &tidekvpb.KVRequest_CompareAndSet{CompareAndSet: in}},
		(*tidekvpb.KVResponse).GetCompareAndSet, func() (*tidekvpb.CompareAndSetResponse, error) { return m.unary.CompareAndSet(ctx, in, opts...) })
}

// Batch opens a raw stream, for callers that multiplex themselves.
func (m *muxKV) Batch(ctx context.Context, opts ...grpc.CallOption) (tidekvpb.KV_BatchClient, error) {
	return m.unary.Batch(ctx, opts...)
}
