package resp

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// gatedKV is a fakeKV whose first Txn waits for release, and which counts
// its Txn calls.
type gatedKV struct {
	*fakeKV
	release chan struct{}
	txns    atomic.Int32
}

func (g *gatedKV) Txn(ctx context.Context, fn func(TxnKV) error) error {
	if g.txns.Add(1) == 1 {
		<-g.release
	}
	return g.fakeKV.Txn(ctx, fn)
}

// queued is how many commands wait on key's queue of kv.
func (s *Server) queued(kv KV, key string) int {
	s.comb.mu.Lock()
	defer s.comb.mu.Unlock()
	if q := s.comb.queues[combineKey{kv: kv, key: key}]; q != nil {
		return len(q.pending)
	}
	return 0
}

// Commands writing one list while a transaction on it runs wait, and run
// together in the next one, each with its own reply: one LPUSH, then ten
// LPUSHes and a SADD on the list (WRONGTYPE, which writes nothing and
// leaves the others be) in one more transaction.
func TestCommandsOnOneKeyShareATransaction(t *testing.T) {
	kv := &gatedKV{fakeKV: newFakeKV(), release: make(chan struct{})}
	s, rc := start(t, kv, nil, func(o *redis.Options) { o.PoolSize = 16 })
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- rc.LPush(ctx, "l", "first").Err() }()
	for kv.txns.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	const n = 10
	var wg sync.WaitGroup
	lens := make(chan int64, n)
	errs := make(chan error, n+1)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := rc.LPush(ctx, "l", "x").Result()
			if err != nil {
				errs <- err
			}
			lens <- v
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs <- rc.SAdd(ctx, "l", "m").Err()
	}()
	// The first runs its batch (taken off the queue) and the others wait
	// in the queue behind it.
	for deadline := time.Now().Add(10 * time.Second); s.queued(kv, "l") < n+1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(kv.release)
			t.Fatalf("%d commands wait on the list's queue, want %d", s.queued(kv, "l"), n+1)
		}
	}
	close(kv.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(lens)
	close(errs)
	for err := range errs {
		if err == nil || err.Error() != errWrongType {
			t.Fatalf("SADD on the list: %v, want WRONGTYPE", err)
		}
	}
	seen := map[int64]bool{}
	for v := range lens {
		if v < 2 || v > n+1 || seen[v] {
			t.Fatalf("LPUSH replies %v and %d: want each of 2..%d once", seen, v, n+1)
		}
		seen[v] = true
	}
	if got := kv.txns.Load(); got != 2 {
		t.Fatalf("%d transactions, want 2 (the first command's, then the others' together)", got)
	}
	if l, err := rc.LLen(ctx, "l").Result(); err != nil || l != n+1 {
		t.Fatalf("LLEN = %d, %v; want %d", l, err, n+1)
	}
}
