package resp

import (
	"context"
	"fmt"
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

// readCountKV is a gatedKV whose transactions count their reads of keys
// they have not written (those a store's transaction sends to its
// coordinator), per transaction.
type readCountKV struct {
	*gatedKV
	mu    sync.Mutex
	reads []int // per transaction, in order
}

func (k *readCountKV) Txn(ctx context.Context, fn func(TxnKV) error) error {
	return k.gatedKV.Txn(ctx, func(tx TxnKV) error {
		k.mu.Lock()
		k.reads = append(k.reads, 0)
		n := len(k.reads) - 1
		k.mu.Unlock()
		return fn(&countingTx{TxnKV: tx, k: k, n: n, written: map[string]bool{}})
	})
}

type countingTx struct {
	TxnKV
	k       *readCountKV
	n       int
	written map[string]bool
}

// count counts one call if it reads a key not written.
func (t *countingTx) count(keys ...[]byte) {
	for _, key := range keys {
		if !t.written[string(key)] {
			t.k.mu.Lock()
			t.k.reads[t.n]++
			t.k.mu.Unlock()
			return
		}
	}
}

func (t *countingTx) Get(ctx context.Context, key []byte) (Result, error) {
	t.count(key)
	return t.TxnKV.Get(ctx, key)
}

func (t *countingTx) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	t.count(keys...)
	return t.TxnKV.BatchGet(ctx, keys)
}

func (t *countingTx) Put(ctx context.Context, key, value []byte) error {
	t.written[string(key)] = true
	return t.TxnKV.Put(ctx, key, value)
}

func (t *countingTx) PutExpiring(ctx context.Context, key, value []byte, e Expiry) error {
	t.written[string(key)] = true
	return t.TxnKV.PutExpiring(ctx, key, value, e)
}

func (t *countingTx) Delete(ctx context.Context, key []byte) error {
	t.written[string(key)] = true
	return t.TxnKV.Delete(ctx, key)
}

// The SADDs (and ZADDs) run together in one transaction read the keys
// they look at, the set's metadata and every member's key, in at most two
// calls before they run, not one or two each: ten SADDs of one set read
// in one call of the store for its metadata and one for all ten members.
func TestBatchReadsItsCommandsKeysAhead(t *testing.T) {
	for _, add := range []func(rc *redis.Client, m string) error{
		func(rc *redis.Client, m string) error { return rc.SAdd(context.Background(), "k", m).Err() },
		func(rc *redis.Client, m string) error {
			return rc.ZAdd(context.Background(), "k", redis.Z{Score: 1, Member: m}).Err()
		},
	} {
		kv := &readCountKV{gatedKV: &gatedKV{fakeKV: newFakeKV(), release: make(chan struct{})}}
		s, rc := start(t, kv, nil, func(o *redis.Options) { o.PoolSize = 16 })
		first := make(chan error, 1)
		go func() { first <- add(rc, "m0") }()
		for kv.txns.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		const n = 10
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- add(rc, fmt.Sprintf("m%d", i+1)) }()
		}
		for deadline := time.Now().Add(10 * time.Second); s.queued(kv, "k") < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				close(kv.release)
				t.Fatalf("%d commands wait on the key's queue, want %d", s.queued(kv, "k"), n)
			}
		}
		close(kv.release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		kv.mu.Lock()
		reads := kv.reads
		kv.mu.Unlock()
		if len(reads) != 2 || reads[1] > 2 {
			t.Fatalf("reads of the store per transaction %v; want two transactions, the second's %d commands reading in at most 2 calls", reads, n)
		}
	}
}
