package geo

import (
	"slices"
	"sync"
)

// chain is one transaction's run through its partitions: it visits them
// in ascending order (its hops), each hop evaluating the operations on its
// own keys and handing on what it found, the last deciding the outcome.
type chain struct {
	txn  *Txn
	hops []int           // partitions, ascending
	in   []chan struct{} // in[k] is closed when hop k may run
	done chan struct{}   // closed once res is final
	// Filled by the hops: per operation index, the value it left (or
	// read); the first operation (by index) that aborts, and why. Every
	// hop runs even after an abort, so the reason is the one running the
	// operations in order gives.
	vals    []KV
	abortAt int
	abort   string
	res     Result
}

// execute runs txns, in this order, on s: every partition runs in its own
// goroutine and takes the hops that reach it in the transactions' order,
// waiting for each transaction's outcome before the next one (so it never
// reads a value that might still be undone). Partitions that share no
// transaction run in parallel; every DC gets the result of running txns
// one by one in order, whatever the scheduling. fault, if set, alters each
// result before it is applied (tests inject divergence with it). Pure but
// for its goroutines: no clock, no I/O.
func execute(s *Store, txns []*Txn, members uint64, fault func(*Result)) []Result {
	chains := make([]*chain, len(txns))
	queues := make([][]*chain, len(s.parts))
	for i, t := range txns {
		c := &chain{txn: t, done: make(chan struct{}), vals: make([]KV, len(t.Ops)), abortAt: len(t.Ops)}
		for _, op := range t.Ops {
			c.hops = append(c.hops, s.part(op.Key))
		}
		slices.Sort(c.hops)
		c.hops = slices.Compact(c.hops)
		c.in = make([]chan struct{}, len(c.hops))
		for k := range c.in {
			c.in[k] = make(chan struct{})
		}
		close(c.in[0])
		for _, p := range c.hops {
			queues[p] = append(queues[p], c)
		}
		chains[i] = c
	}
	var wg sync.WaitGroup
	for p, q := range queues {
		wg.Go(func() {
			for _, c := range q {
				c.runHop(s, p, members, fault)
			}
		})
	}
	wg.Wait()
	out := make([]Result, len(chains))
	for i, c := range chains {
		out[i] = c.res
	}
	return out
}

// runHop runs c's hop at partition p: waits for the hop before, evaluates
// p's operations, hands on (or decides), then waits for the outcome and
// applies p's part of the writes.
func (c *chain) runHop(s *Store, p int, members uint64, fault func(*Result)) {
	k := slices.Index(c.hops, p)
	<-c.in[k]
	part := s.parts[p]
	local := map[string]KV{} // this transaction's own earlier writes
	for i := range c.txn.Ops[:c.abortAt] {
		op := &c.txn.Ops[i]
		if s.part(op.Key) != p {
			continue
		}
		cur, ok := local[op.Key]
		if !ok {
			v, found := part[op.Key]
			cur = KV{Key: op.Key, Value: v, Found: found}
		}
		nv, nfound, abort := op.apply(cur.Value, cur.Found)
		if abort != "" {
			c.abortAt, c.abort = i, abort
			break
		}
		local[op.Key] = KV{Key: op.Key, Value: nv, Found: nfound}
		c.vals[i] = local[op.Key]
	}
	if k+1 < len(c.hops) {
		close(c.in[k+1])
	} else {
		c.finish(members, fault)
		close(c.done)
	}
	<-c.done
	if c.res.Committed {
		for _, w := range c.res.Writes {
			if s.part(w.Key) == p {
				s.applyOne(part, w)
			}
		}
	}
}

// finish builds the result once every hop ran.
func (c *chain) finish(members uint64, fault func(*Result)) {
	c.res = Result{ID: c.txn.ID, Members: members, Committed: c.abort == "", Reason: c.abort}
	if c.res.Committed {
		for i, op := range c.txn.Ops {
			switch op.Kind {
			case OpGet:
				c.res.Reads = append(c.res.Reads, c.vals[i])
			case OpPut, OpDelete, OpAdd:
				c.res.Writes = append(c.res.Writes, c.vals[i])
			}
		}
	}
	if fault != nil {
		fault(&c.res)
	}
}
