package resp

import (
	"context"
	"sync"
)

// Commands that write one collection (LPUSH, SADD, ZADD, ...) are each a
// KV.Txn that reads and rewrites the collection's metadata key. Run side
// by side, such transactions on one key conflict: all but one retry,
// after a back-off that grows with each retry, and with 50 connections on
// one list most time out (redis-benchmark -t lpush, issue 37). So the
// transactions of one key wait in a queue here instead: while one batch
// runs, the commands arriving meanwhile queue, and the next batch runs them
// all in one transaction, each on its own savepoint as EXEC runs its queue
// (txView), in arrival order. A command that fails (WRONGTYPE) writes
// nothing and the others commit; the batch commits or retries as one. Each
// command is still atomic, and takes effect between its arrival and its
// reply. Transactions from other nodes' gateways may still conflict with a
// batch, and retry as before.

// maxCombined bounds the commands of one batch, and maxCombinedArgs their
// arguments (a batch is one transaction, whose keys and bytes are bounded:
// docs/transactions.md); a command over it runs in a batch of its own.
const (
	maxCombined     = 64
	maxCombinedArgs = 1024
)

// combiner queues the transactions of commands by key.
type combiner struct {
	mu     sync.Mutex
	queues map[combineKey]*combineQueue
}

// combineKey is a key in a database: commands on the same key of two
// databases are two queues.
type combineKey struct {
	kv  KV
	key string
}

type combineQueue struct {
	pending []*combined
}

// combined is one command's transaction body waiting in a queue.
type combined struct {
	body func(TxnKV) error
	// reads, if set, names keys body will read (it may read through tx
	// to find them), so that the batch reads all its commands' keys in
	// one call before the bodies run (readAhead).
	reads func(tx TxnKV) [][]byte
	args  int
	// wake gets one value: the command finished (err is its outcome), or
	// it heads the queue and runs the next batch.
	wake     chan struct{}
	finished bool
	err      error
}

// keyTxn runs body in a transaction of x.kv, in a batch with the other
// commands writing key (see above); reads (nil: none) names keys body
// will read, read ahead with the batch's others. Inside EXEC it is EXEC's
// own savepoint.
func (x *call) keyTxn(key []byte, reads func(TxnKV) [][]byte, body func(TxnKV) error) error {
	if _, inExec := x.kv.(*txView); inExec {
		return x.kv.Txn(x.ctx, body)
	}
	s := x.s
	k := combineKey{kv: x.kv, key: string(key)}
	c := &combined{body: body, reads: reads, args: len(x.args), wake: make(chan struct{}, 1)}
	s.comb.mu.Lock()
	if s.comb.queues == nil {
		s.comb.queues = map[combineKey]*combineQueue{}
	}
	q := s.comb.queues[k]
	lead := q == nil
	if lead {
		q = &combineQueue{}
		s.comb.queues[k] = q
	}
	q.pending = append(q.pending, c)
	s.comb.mu.Unlock()
	if !lead {
		select {
		case <-c.wake:
		case <-x.ctx.Done():
			if s.comb.leave(k, c) {
				return x.ctx.Err()
			}
			// A batch has it, or it runs the next: either ends within
			// a batch's deadline.
			<-c.wake
		}
		if c.finished {
			return c.err
		}
	}
	// c heads the queue: it runs a batch from there, then hands the queue
	// to the next command waiting, if any.
	batch := s.comb.take(q)
	s.runBatch(x.kv, batch)
	s.comb.mu.Lock()
	if len(q.pending) > 0 {
		q.pending[0].wake <- struct{}{}
	} else {
		delete(s.comb.queues, k)
	}
	s.comb.mu.Unlock()
	for _, b := range batch {
		if b != c {
			b.finished = true
			b.wake <- struct{}{}
		}
	}
	return c.err
}

// take removes the next batch from the head of q: at least one command,
// then as many as fit maxCombined and maxCombinedArgs.
func (cb *combiner) take(q *combineQueue) []*combined {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	n, args := 1, q.pending[0].args
	for n < len(q.pending) && n < maxCombined && args+q.pending[n].args <= maxCombinedArgs {
		args += q.pending[n].args
		n++
	}
	batch := append([]*combined(nil), q.pending[:n]...)
	q.pending = q.pending[n:]
	return batch
}

// leave takes c out of k's queue if no batch has taken it and it was not
// woken to run the next one (the queue would be left without a runner).
func (cb *combiner) leave(k combineKey, c *combined) bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	q := cb.queues[k]
	if q == nil || len(c.wake) > 0 {
		return false
	}
	for i, p := range q.pending {
		if p == c {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			return true
		}
	}
	return false
}

// runBatch runs the batch's bodies in one transaction of kv, each on a
// savepoint, and sets each command's outcome. The batch has a deadline of
// its own, not any one command's: the connection that runs it may close,
// and the others still want their answer.
func (s *Server) runBatch(kv KV, batch []*combined) {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout(batchArgs(batch)))
	defer cancel()
	err := kv.Txn(ctx, func(tx TxnKV) error {
		ahead := &readAhead{TxnKV: batchTx{TxnKV: tx, ctx: ctx}, got: map[string]Result{}}
		if err := ahead.readFor(ctx, batch); err != nil {
			return err
		}
		view := &txView{tx: ahead, now: s.cfg.Now}
		for _, c := range batch {
			c.err = view.Txn(ctx, func(tx TxnKV) error { return c.body(batchTx{TxnKV: tx, ctx: ctx}) })
			if view.err != nil {
				return view.err
			}
		}
		return nil
	})
	if err != nil {
		for _, c := range batch {
			c.err = err
		}
	}
}

// batchTx runs a command's reads and writes under its batch's context,
// not the one the command passes (its own): one connection closing must
// not fail the batch of the others. Command contexts carry no values
// (cmdCtx), only an end.
type batchTx struct {
	TxnKV
	ctx context.Context
}

func (t batchTx) Get(_ context.Context, key []byte) (Result, error) { return t.TxnKV.Get(t.ctx, key) }

func (t batchTx) BatchGet(_ context.Context, keys [][]byte) ([]Result, error) {
	return t.TxnKV.BatchGet(t.ctx, keys)
}

func (t batchTx) Put(_ context.Context, key, value []byte) error {
	return t.TxnKV.Put(t.ctx, key, value)
}

func (t batchTx) PutExpiring(_ context.Context, key, value []byte, e Expiry) error {
	return t.TxnKV.PutExpiring(t.ctx, key, value, e)
}

func (t batchTx) Delete(_ context.Context, key []byte) error { return t.TxnKV.Delete(t.ctx, key) }

func (t batchTx) Scan(_ context.Context, start, end []byte, limit int) ([]KeyValue, error) {
	return t.TxnKV.Scan(t.ctx, start, end, limit)
}

// readAhead is a batch's transaction with the keys its commands name
// (combined.reads) read in one call before they run: a SADD or ZADD reads
// its members' keys, and a batch of 64 of them read one by one waited
// for 64 round trips to the transaction's coordinator. A key read is
// answered from got until the batch writes it; the values stay the
// transaction's snapshot (a read timestamp raised later refreshes them,
// or the transaction retries).
type readAhead struct {
	TxnKV
	got map[string]Result
}

// readFor reads the keys the batch's commands name, each once.
func (r *readAhead) readFor(ctx context.Context, batch []*combined) error {
	var keys [][]byte
	seen := map[string]bool{}
	for _, c := range batch {
		if c.reads == nil {
			continue
		}
		for _, k := range c.reads(r) {
			if _, ok := r.got[string(k)]; !ok && !seen[string(k)] {
				seen[string(k)] = true
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := r.read(ctx, keys)
	return err
}

func (r *readAhead) Get(ctx context.Context, key []byte) (Result, error) {
	if res, ok := r.got[string(key)]; ok {
		return res, nil
	}
	res, err := r.TxnKV.Get(ctx, key)
	if err == nil {
		r.got[string(key)] = res
	}
	return res, err
}

func (r *readAhead) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	return readRest(ctx, keys, func(k []byte) (Result, bool) {
		res, ok := r.got[string(k)]
		return res, ok
	}, r.read)
}

// read reads keys in one call and keeps what it read.
func (r *readAhead) read(ctx context.Context, keys [][]byte) ([]Result, error) {
	rs, err := r.TxnKV.BatchGet(ctx, keys)
	for i, res := range rs {
		r.got[string(keys[i])] = res
	}
	return rs, err
}

func (r *readAhead) Put(ctx context.Context, key, value []byte) error {
	delete(r.got, string(key))
	return r.TxnKV.Put(ctx, key, value)
}

func (r *readAhead) PutExpiring(ctx context.Context, key, value []byte, e Expiry) error {
	delete(r.got, string(key))
	return r.TxnKV.PutExpiring(ctx, key, value, e)
}

func (r *readAhead) Delete(ctx context.Context, key []byte) error {
	delete(r.got, string(key))
	return r.TxnKV.Delete(ctx, key)
}
