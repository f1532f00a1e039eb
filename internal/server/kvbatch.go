package server

import (
	"context"
	"io"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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

// Batch serves KV requests multiplexed on one stream (docs/batch-rpc.md).
// Each request runs in its own goroutine through the same handler as its
// unary call, so admission, validation, routing errors and metrics are the
// same; answers go back as they finish, as many per message as are ready.
// Writes pass the admission gate as each message is read, so a shedding
// node refuses them before it starts any work, and the refusal shares its
// message with the other answers.
func (k *kvService) Batch(stream tidekvpb.KV_BatchServer) error {
	s := k.s
	id, err := s.streamIdentity(stream.Context())
	if err != nil {
		return err
	}
	r := &batchReader{k: k, stream: stream, id: id,
		out: newBatchSender(stream, s.store.HLC(), min(s.cfg.Limits.MaxMessageSize, maxClientMessage)-messageSlack)}
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
	k      *kvService
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
	s, ctx := r.k.s, r.stream.Context()
	for {
		msg, err := r.stream.Recv()
		if err != nil {
			return err
		}
		arr := arrivals{ctx: ctx, at: time.Now()}
		_ = s.updateClock(msg.GetHlc(), "a client")
		s.metrics.StreamMessages.Inc()
		s.metrics.StreamRequests.Add(float64(len(msg.GetRequests())))
		for _, req := range msg.GetRequests() {
			if err := r.out.reserve(ctx); err != nil {
				return err
			}
			if !r.begin() {
				return nil
			}
			r.start(&arr, req)
		}
	}
}

// arrivals are the contexts of one message's requests by priority: they
// arrived together, so each priority's context is made once per message,
// not once per request.
type arrivals struct {
	ctx context.Context
	at  time.Time
	by  [admission.High + 1]context.Context
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
	s := r.k.s
	p := admissionPriority(req.GetPriority())
	if !kvbatch.IsRead(req) {
		var answer *tidekvpb.KVResponse
		if err := s.permitWrite(r.id, req); err != nil {
			answer = kvbatch.ErrResponse(req.GetId(), err)
		} else if err := s.adm.Gate(p); err != nil {
			answer = refusedAnswer(req.GetId(), err)
		}
		if answer != nil {
			r.out.push(answer)
			r.wg.Done()
			return
		}
	}
	r.k.workers.run(batchJob{r: r, ctx: arr.of(p), req: req})
}

// batchJob is a stream's request for a worker: a value, so that handing
// it over allocates nothing.
type batchJob struct {
	r   *batchReader
	ctx context.Context
	req *tidekvpb.KVRequest
}

func (j batchJob) run() {
	j.r.out.push(kvbatch.Dispatch(j.ctx, j.r.k, j.req))
	j.r.wg.Done()
}

// permitCall checks that the caller of ctx's call may also call method,
// for a request that carries another method's work.
func (s *Server) permitCall(ctx context.Context, method string) error {
	if s.sec == nil {
		return nil
	}
	id, err := s.streamIdentity(ctx)
	if err != nil {
		return err
	}
	return security.Permit(id, method)
}

// streamIdentity is who opened a Batch stream on a secure node (the stream
// interceptor has authenticated it for reads); the zero Identity on an
// insecure one.
func (s *Server) streamIdentity(ctx context.Context) (security.Identity, error) {
	if s.sec == nil {
		return security.Identity{}, nil
	}
	return security.Authenticator{Users: s.sec.users}.Identify(ctx)
}

// permitWrite checks that a stream's user may make a write, as the
// write's unary method's role check would (the stream was opened with
// the role to read).
func (s *Server) permitWrite(id security.Identity, req *tidekvpb.KVRequest) error {
	if s.sec == nil {
		return nil
	}
	return security.Permit(id, kvbatch.Method(req))
}

// batchSender sends a stream's answers: whatever has finished since the
// last send goes in one message. It also holds the stream's slots
// (maxStreamInflight), freed as answers are sent.
type batchSender struct {
	stream tidekvpb.KV_BatchServer
	clock  *hlc.Clock // stamps every message
	limit  int        // bytes per message
	slots  chan struct{}
	wake   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	pending []*tidekvpb.KVResponse
	closed  bool
}

func newBatchSender(stream tidekvpb.KV_BatchServer, clock *hlc.Clock, limit int) *batchSender {
	return &batchSender{stream: stream, clock: clock, limit: limit, slots: make(chan struct{}, maxStreamInflight),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// reserve takes a slot for one request, waiting while the stream is full.
func (b *batchSender) reserve(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// push queues an answer (its request holds a slot).
func (b *batchSender) push(r *tidekvpb.KVResponse) {
	b.mu.Lock()
	b.pending = append(b.pending, r)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// close sends what is left and waits for the sender; no push may follow.
func (b *batchSender) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	<-b.done
}

func (b *batchSender) run() {
	defer close(b.done)
	broken := false
	for range b.wake {
		runtime.Gosched() // as the client's sender: let finished requests join this message
		b.mu.Lock()
		batch, closed := b.pending, b.closed
		b.pending = nil
		b.mu.Unlock()
		for len(batch) > 0 {
			n, size := 0, 0
			for n < len(batch) {
				if sz := proto.Size(batch[n]); n == 0 || size+sz <= b.limit {
					n, size = n+1, size+sz
					continue
				}
				break
			}
			// A stream that failed to send is over: its client sees the
			// error, and the answers left only need their slots back.
			if !broken && b.stream.Send(&tidekvpb.KVBatchResponse{Responses: batch[:n], Hlc: tidekvpb.FromHLC(b.clock.Now())}) != nil {
				broken = true
			}
			for range n {
				<-b.slots
			}
			batch = batch[n:]
		}
		if closed {
			return
		}
	}
}

// workers run stream requests on long-lived goroutines, whose stacks have
// grown to what a request needs: a fresh goroutine per request spent a
// tenth of a node's CPU growing its stack. When every worker is busy
// (requests waiting on Raft) a request gets a goroutine of its own.
type workers struct {
	work    chan batchJob
	stopper <-chan struct{}
}

func newWorkers(n int, stopper <-chan struct{}) *workers {
	w := &workers{work: make(chan batchJob), stopper: stopper}
	for range n {
		go w.loop()
	}
	return w
}

func (w *workers) run(j batchJob) {
	select {
	case w.work <- j:
	default:
		go j.run()
	}
}

func (w *workers) loop() {
	for {
		select {
		case j := <-w.work:
			j.run()
		case <-w.stopper:
			return
		}
	}
}
