package kvstream

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kvbatch"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/security"
)

// maxStreamInflight bounds the requests of one Batch stream that are
// running or whose answers are not yet sent. A full stream stops reading,
// so a client that sends faster than the node answers is held back by
// HTTP/2 flow control, not buffered in the node's memory.
const maxStreamInflight = 1024

// batchWorkers is how many goroutines wait to run stream requests (as
// grpc.NumStreamWorkers does for unary calls).
const batchWorkers = 64

// Answers are grouped into messages the client accepts: below its receive
// limit (the Go client's, 64 MiB) and the node's own send limit, with room
// for framing. A single answer always fits (Limits.Validate).
const (
	maxClientMessage = 64 << 20
	messageSlack     = 64 << 10
)

// Node is the node as its Batch streams see it.
type Node interface {
	// Identify is who opened the stream on a secure node (the stream
	// interceptor has authenticated it for reads); the zero Identity on
	// an insecure one.
	Identify(ctx context.Context) (security.Identity, error)
	// Clock is the node's clock, which stamps every message sent.
	Clock() *hlc.Clock
	// Received is told of every message read: the node's clock learns
	// the message's timestamp and the node counts it and its requests.
	Received(msg *tidekvpb.KVBatchRequest)
	// Priority is how admission treats a request's API priority.
	Priority(p tidekvpb.Priority) admission.Priority
	// Refuse is the answer to a write the node refuses as it is read, at
	// admission priority p: its user may not make it (the stream was
	// opened with the role to read), or admission sheds it. Nil runs it.
	Refuse(id security.Identity, req *tidekvpb.KVRequest, p admission.Priority) *tidekvpb.KVResponse
}

// Server serves a node's Batch streams.
type Server struct {
	node    Node
	kv      tidekvpb.KVServer // the unary handlers every request runs through
	limit   int               // bytes per answer message
	stopper <-chan struct{}
	workers *workers
}

// New serves streams through kv's unary handlers, sending messages no
// larger than maxSend (the node's send limit) and ending every stream
// when stopper closes.
func New(node Node, kv tidekvpb.KVServer, maxSend int, stopper <-chan struct{}) *Server {
	return &Server{node: node, kv: kv, limit: min(maxSend, maxClientMessage) - messageSlack, stopper: stopper,
		workers: newWorkers(batchWorkers, stopper)}
}

// Serve serves one stream until its client ends it or the node stops.
// Each request runs in its own goroutine through the same handler as its
// unary call, so admission, validation, routing errors and metrics are the
// same; answers go back as they finish, as many per message as are ready.
// Writes pass the admission gate as each message is read, so a shedding
// node refuses them before it starts any work, and the refusal shares its
// message with the other answers.
func (s *Server) Serve(stream tidekvpb.KV_BatchServer) error {
	id, err := s.node.Identify(stream.Context())
	if err != nil {
		return err
	}
	r := &batchReader{s: s, stream: stream, id: id, out: newBatchSender(stream, s.node.Clock(), s.limit)}
	go r.out.run()
	done := make(chan error, 1)
	go func() { done <- r.read() }()
	select {
	case err = <-done:
	case <-s.stopper:
		// A stream lasts as long as its client: a stopping node ends it
		// (after answering what it started) rather than wait for it.
		r.stop()
		err = status.Error(codes.Unavailable, "node is stopping")
	}
	r.wg.Wait()
	r.out.close()
	if err == io.EOF {
		return nil
	}
	return err
}

// batchReader reads one Batch stream's requests and starts each.
type batchReader struct {
	s      *Server
	stream tidekvpb.KV_BatchServer
	id     security.Identity
	out    *batchSender

	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup // requests started and not yet answered
}

func (r *batchReader) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}

// begin counts a request in, unless the stream is stopping.
func (r *batchReader) begin() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	r.wg.Add(1)
	return true
}

// read runs until the stream ends or the node stops.
func (r *batchReader) read() error {
	ctx := r.stream.Context()
	for {
		msg, err := r.stream.Recv()
		if err != nil {
			return err
		}
		arr := arrivals{ctx: ctx, at: time.Now(), n: len(msg.GetRequests())}
		r.s.node.Received(msg)
		stop, err := r.startAll(&arr, msg.GetRequests())
		arr.release()
		if stop {
			return err
		}
	}
}

// startAll starts a message's requests; stop says the stream is over, err
// why (nil when the node stops).
func (r *batchReader) startAll(arr *arrivals, reqs []*tidekvpb.KVRequest) (stop bool, err error) {
	for _, req := range reqs {
		if err := r.out.reserve(arr.ctx); err != nil {
			return true, err
		}
		if !r.begin() {
			return true, nil
		}
		r.start(arr, req)
	}
	return false, nil
}

// arrivals are the contexts of one message's requests by priority and
// timeout: they arrived together, so each priority's context is made once
// per message, not once per request, and so is each deadline (a timer and
// a child of the stream's context, about 3 µs of a write's server CPU
// when every request made its own).
type arrivals struct {
	ctx context.Context
	at  time.Time
	n   int // requests in the message
	by  [admission.High + 1]context.Context
	// Made for n on first use, so that it never grows and its elements,
	// which the message's requests point to, never move: one allocation
	// per message, not per deadline.
	deadlines []deadline
}

// deadline is a context ending a timeout after its message arrived,
// shared by the message's requests with that priority and timeout, and
// cancelled when the last of them is answered. The message holds a
// reference of its own until all its requests have started, so one
// answered early cannot end the context of one not yet started.
type deadline struct {
	p      admission.Priority
	ms     uint32
	ctx    context.Context
	cancel context.CancelFunc
	refs   atomic.Int32
}

func (d *deadline) release() {
	if d.refs.Add(-1) == 0 {
		d.cancel()
	}
}

// within is the context of a request at priority p with timeout ms (none
// for 0), holding a reference to its deadline (nil for none).
func (a *arrivals) within(p admission.Priority, ms uint32) (context.Context, *deadline) {
	if ms == 0 {
		return a.of(p), nil
	}
	for i := range a.deadlines {
		if d := &a.deadlines[i]; d.p == p && d.ms == ms {
			d.refs.Add(1)
			return d.ctx, d
		}
	}
	if a.deadlines == nil {
		a.deadlines = make([]deadline, 0, a.n)
	}
	a.deadlines = a.deadlines[:len(a.deadlines)+1]
	d := &a.deadlines[len(a.deadlines)-1]
	d.p, d.ms = p, ms
	d.ctx, d.cancel = context.WithDeadline(a.of(p), a.at.Add(time.Duration(ms)*time.Millisecond))
	d.refs.Store(2) // the message's and the request's
	return d.ctx, d
}

// release drops the message's references once its requests have started.
func (a *arrivals) release() {
	for i := range a.deadlines {
		a.deadlines[i].release()
	}
}

func (a *arrivals) of(p admission.Priority) context.Context {
	if a.by[p] == nil {
		a.by[p] = admission.WithArrival(a.ctx, a.at, p, true)
	}
	return a.by[p]
}

// start answers a write the node refuses at once, and runs anything else
// on a worker.
func (r *batchReader) start(arr *arrivals, req *tidekvpb.KVRequest) {
	p := r.s.node.Priority(req.GetPriority())
	if !kvbatch.IsRead(req) {
		if answer := r.s.node.Refuse(r.id, req, p); answer != nil {
			r.out.push(answer)
			r.wg.Done()
			return
		}
	}
	ctx, d := arr.within(p, req.GetTimeoutMs())
	r.s.workers.run(batchJob{r: r, ctx: ctx, deadline: d, req: req})
}

// batchJob is a stream's request for a worker: a value, so that handing
// it over allocates nothing.
type batchJob struct {
	r        *batchReader
	ctx      context.Context // ends at the request's timeout
	deadline *deadline       // ctx's, released when answered; nil for none
	req      *tidekvpb.KVRequest
}

func (j batchJob) run() {
	j.r.out.push(kvbatch.Run(j.ctx, j.r.s.kv, j.req))
	if j.deadline != nil {
		j.deadline.release()
	}
	j.r.wg.Done()
}
