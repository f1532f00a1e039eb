package kvstream

import (
	"context"
	"runtime"
	"sync"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

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
