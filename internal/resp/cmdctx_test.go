package resp

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// blockingKV's Get waits for its context to end (by Done, or, with
// errOnly, by sleeping to the deadline and asking Err) and reports the
// error it saw on seen; every context it was given is kept in ctxs.
type blockingKV struct {
	*fakeKV
	errOnly bool
	entered chan struct{}
	seen    chan error
	mu      sync.Mutex
	ctxs    []context.Context
}

func newBlockingKV(errOnly bool) *blockingKV {
	return &blockingKV{fakeKV: newFakeKV(), errOnly: errOnly, entered: make(chan struct{}, 10), seen: make(chan error, 10)}
}

func (b *blockingKV) Get(ctx context.Context, key []byte) ([]byte, error) {
	if string(key) != encKeyString("slow") {
		return b.fakeKV.Get(ctx, key)
	}
	b.mu.Lock()
	b.ctxs = append(b.ctxs, ctx)
	b.mu.Unlock()
	b.entered <- struct{}{}
	if b.errOnly {
		d, _ := ctx.Deadline()
		time.Sleep(time.Until(d))
	} else {
		<-ctx.Done()
	}
	err := ctx.Err()
	b.seen <- err
	return nil, err
}

func encKeyString(k string) string { return string(encKey([]byte(k))) }

// A command that outlasts RequestTimeout fails with the timeout error,
// whether its KV waited on Done or only asked Err; the connection's next
// commands run as usual, and the timed-out command's context stays done.
func TestCommandTimeout(t *testing.T) {
	for _, errOnly := range []bool{false, true} {
		kv := newBlockingKV(errOnly)
		_, rc := start(t, kv, func(c *Config) { c.RequestTimeout = 50 * time.Millisecond }, func(o *redis.Options) { o.PoolSize = 1 })
		ctx := context.Background()
		for range 2 {
			wantErr(t, rc.Get(ctx, "slow").Err(), "ERR timeout: the command did not complete in time")
			if err := <-kv.seen; !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("errOnly=%v: KV saw %v, want DeadlineExceeded", errOnly, err)
			}
			eq(t, must(rc.Set(ctx, "k", "v", 0).Result()), "OK")
			eq(t, must(rc.Get(ctx, "k").Result()), "v")
		}
		kv.mu.Lock()
		for _, c := range kv.ctxs {
			select {
			case <-c.Done():
			default:
				t.Fatalf("errOnly=%v: an ended command's context is not done", errOnly)
			}
			if c.Err() == nil {
				t.Fatalf("errOnly=%v: an ended command's context has no Err", errOnly)
			}
		}
		kv.mu.Unlock()
	}
}

// Closing the server cancels a command in flight, long before its
// deadline.
func TestCloseCancelsCommand(t *testing.T) {
	kv := newBlockingKV(false)
	s, rc := start(t, kv, func(c *Config) { c.RequestTimeout = time.Hour }, nil)
	errc := make(chan error, 1)
	go func() { errc <- rc.Get(context.Background(), "slow").Err() }()
	<-kv.entered
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-kv.seen; !errors.Is(err, context.Canceled) {
		t.Fatalf("KV saw %v, want Canceled", err)
	}
	if err := <-errc; err == nil {
		t.Fatal("GET succeeded on a closed server")
	}
}

// Closing a connection cancels its command in flight and every command
// it would begin later; a command's end cancels what was derived from
// its context.
func TestConnContext(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newConnContext(parent)

	var h cmdCtx
	c.begin(&h, time.Hour)
	child, stop := context.WithCancel(&h)
	defer stop()
	if h.Err() != nil || child.Err() != nil {
		t.Fatal("a fresh command's context has ended")
	}
	h.end()
	<-child.Done() // derived contexts end with the command
	if !errors.Is(child.Err(), context.Canceled) || !errors.Is(h.Err(), context.Canceled) {
		t.Fatalf("after end: %v, %v", h.Err(), child.Err())
	}

	var h2 cmdCtx
	c.begin(&h2, time.Hour)
	done := h2.Done()
	c.close()
	<-done
	if !errors.Is(h2.Err(), context.Canceled) {
		t.Fatalf("after close: %v", h2.Err())
	}
	h2.end()
	var h3 cmdCtx
	c.begin(&h3, time.Hour)
	<-h3.Done()
	if !errors.Is(h3.Err(), context.Canceled) {
		t.Fatalf("begun after close: %v", h3.Err())
	}
	h3.end()

	// The server's cancellation reaches a running command.
	c2 := newConnContext(parent)
	var h4 cmdCtx
	c2.begin(&h4, time.Hour)
	cancel()
	<-h4.Done()
	if !errors.Is(h4.Err(), context.Canceled) {
		t.Fatalf("after the server's cancel: %v", h4.Err())
	}
	h4.end()
}

// A command that only asks Err costs no allocation.
func TestConnContextAllocs(t *testing.T) {
	c := newConnContext(context.Background())
	var h cmdCtx
	if n := testing.AllocsPerRun(100, func() {
		c.begin(&h, time.Hour)
		_ = h.Err()
		h.end()
	}); n != 0 {
		t.Fatalf("%v allocations a command", n)
	}
}
