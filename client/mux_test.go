package client

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// rpcCount is how many of n's KV handler runs came in by gRPC method.
func (n *fakeNode) rpcCount(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rpcs[method]
}

func (n *fakeNode) streamCount() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.streams
}

// Concurrent requests to one node share one stream, and each caller gets
// its own answer back whatever order the node answers in.
func TestMuxConcurrentRequestsShareOneStream(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setRanges(rng(1, "", "", 1, 1))
	cl := c.newClient(nil)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, v := fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%03d", i)
			if err := cl.Put(testCtx(t), k, v); err != nil {
				errs <- err
				return
			}
			got, err := cl.Get(testCtx(t), k)
			if err == nil && !bytes.Equal(got, v) {
				err = fmt.Errorf("get %s = %q, want %q", k, got, v)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	node := c.node(1)
	if s := node.streamCount(); s != 1 {
		t.Fatalf("%d streams opened to the node, want 1", s)
	}
	if got := node.rpcCount(tidekvpb.KV_Batch_FullMethodName); got != 2*n {
		t.Fatalf("%d requests came over the stream, want %d (unary: Put %d, Get %d)", got, 2*n,
			node.rpcCount(tidekvpb.KV_Put_FullMethodName), node.rpcCount(tidekvpb.KV_Get_FullMethodName))
	}
}

// A node without Batch (an older binary) is asked with unary calls, and
// asked for a stream once only.
func TestMuxFallsBackToUnaryCalls(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setRanges(rng(1, "", "", 1, 1))
	node := c.node(1)
	node.mu.Lock()
	node.noBatch = true
	node.mu.Unlock()
	cl := c.newClient(nil)
	for i := range 5 {
		k := fmt.Appendf(nil, "k%d", i)
		mustPut(t, cl, string(k), "v")
		if _, err := cl.Get(testCtx(t), k); err != nil {
			t.Fatal(err)
		}
	}
	if s := node.streamCount(); s != 1 {
		t.Fatalf("%d streams asked for, want 1", s)
	}
	if p, g := node.rpcCount(tidekvpb.KV_Put_FullMethodName), node.rpcCount(tidekvpb.KV_Get_FullMethodName); p != 5 || g != 5 {
		t.Fatalf("unary Puts %d, Gets %d; want 5 each", p, g)
	}
}

// Requests too large to share a message go as unary calls; the rest of the
// traffic stays on the stream.
func TestMuxSendsLargeRequestsAsUnaryCalls(t *testing.T) {
	c := newFakeCluster(t, 1)
	c.setRanges(rng(1, "", "", 1, 1))
	cl := c.newClient(nil)
	mustPut(t, cl, "small", "v")
	mustPut(t, cl, "large", string(make([]byte, maxMuxRequest+1)))
	node := c.node(1)
	if s, u := node.rpcCount(tidekvpb.KV_Batch_FullMethodName), node.rpcCount(tidekvpb.KV_Put_FullMethodName); s != 1 || u != 1 {
		t.Fatalf("puts over the stream %d, unary %d; want 1 and 1", s, u)
	}
}

// What a caller learns when its stream breaks decides whether a write may
// be retried: unsent requests are safe anywhere, sent ones are not.
func TestMuxBrokenStreamErrors(t *testing.T) {
	s := &muxStream{err: status.Error(codes.Unavailable, "connection reset")}
	unsent := status.Convert(s.failure(false))
	if !neverSent(unsent) {
		t.Fatalf("unsent request: %v, want it reported as never sent", unsent.Err())
	}
	sent := status.Convert(s.failure(true))
	if neverSent(sent) || classify(sent, nil) != classTransport {
		t.Fatalf("sent request: %v, want a transport failure of unknown outcome", sent.Err())
	}
	s.err = status.Error(codes.Unauthenticated, "invalid user name or password")
	if st := status.Convert(s.failure(true)); st.Code() != codes.Unauthenticated || st.Message() != "invalid user name or password" {
		t.Fatalf("stream refused at open: %v, want the node's Unauthenticated answer", st.Err())
	}
	s.err = status.Error(codes.Unimplemented, "unknown method Batch")
	if err := s.failure(true); !errors.Is(err, errNoBatch) {
		t.Fatalf("node without Batch: %v, want errNoBatch (retry as a unary call)", err)
	}
}

// A caller that gives up leaves no waiter behind, and its unsent request
// is not sent.
func TestMuxForgetsAbandonedCalls(t *testing.T) {
	s := &muxStream{waiting: map[uint64]*muxCall{}, wake: make(chan struct{}, 1)}
	a := &muxCall{req: &tidekvpb.KVRequest{}, done: make(chan struct{})}
	b := &muxCall{req: &tidekvpb.KVRequest{}, done: make(chan struct{})}
	if !s.enqueue(a) || !s.enqueue(b) {
		t.Fatal("enqueue on a live stream failed")
	}
	if a.req.Id == b.req.Id {
		t.Fatalf("two calls share id %d", a.req.Id)
	}
	s.forget(a)
	if len(s.waiting) != 1 || len(s.queue) != 1 || s.queue[0] != b {
		t.Fatalf("after forgetting a: %d waiting, queue %v; want only b", len(s.waiting), s.queue)
	}
}
