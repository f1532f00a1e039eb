package resp

import (
	"math"
	"math/big"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Blocked clients. A blocking command (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH,
// BLMPOP; listblock.go) that finds nothing to pop registers its client
// here, at the end of a FIFO line for each key it waits on, and waits for
// the first of:
//
//   - a wake: a push through this node wakes the first client in the
//     key's line, and a client that leaves its line wakes the one now
//     first (after taking one element, there may be more);
//   - the re-check interval (Config.BlockRecheck): the node hears of no
//     other node's writes, so a push through another node is seen by
//     this periodic try;
//   - its timeout (a null reply), CLIENT UNBLOCK, its connection closing
//     (it leaves, no reply), or the server closing.
//
// Each try is one transaction, the pop LPOP and LMOVE run, and takes only
// from keys where the client is first in this node's line, so clients
// blocked on one key through one node are served in the order they
// blocked; a new blocking command takes nothing from a key that clients
// wait on here (in Redis such a list is empty: a push serves the waiting
// clients at once). Clients on different nodes race: the first try to
// commit wins. At most MaxBlockedClients wait at once; one more gets
// errMaxBlocked at once, never a place in an unbounded queue.

const errMaxBlocked = "ERR max number of blocked clients reached, retry later"

// blockKey is a key in one database (SELECT n).
type blockKey struct {
	db  int
	key string
}

// waiter is one blocked client.
type waiter struct {
	id   int64      // the connection's (CLIENT UNBLOCK)
	keys []blockKey // distinct
	// reads: the client reads its keys (XREAD) rather than popping, so
	// every push wakes it, wherever it is in the line.
	reads bool
	// wake holds at most one pending wake: a wake while one is pending
	// adds nothing, since the try it causes looks at every key.
	wake chan struct{}
	// unblock receives CLIENT UNBLOCK's: true to answer with an error,
	// false as a timeout.
	unblock chan bool
	// Under blockedClients.mu: trying, the client is in a try; served,
	// what pushers wait on: closed when the client's next try has ended
	// (and the clients it handed the key on to have tried).
	trying bool
	served []chan struct{}
}

func newWaiter(id int64, db int, keys [][]byte, reads bool) *waiter {
	w := &waiter{id: id, reads: reads, wake: make(chan struct{}, 1), unblock: make(chan bool, 1)}
	for _, k := range keys {
		bk := blockKey{db, string(k)}
		if !slices.Contains(w.keys, bk) {
			w.keys = append(w.keys, bk)
		}
	}
	return w
}

func (w *waiter) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// blockedClients is the node's registry of blocked clients.
type blockedClients struct {
	max int
	// n counts the registered clients; read without mu by ready, so that
	// a push costs no lock while nobody waits.
	n     atomic.Int64
	mu    sync.Mutex
	lines map[blockKey][]*waiter
	byID  map[int64]*waiter
}

func newBlockedClients(max int) *blockedClients {
	return &blockedClients{max: max, lines: map[blockKey][]*waiter{}, byID: map[int64]*waiter{}}
}

// unblock ends the wait of connection id's client as CLIENT UNBLOCK
// does: with an error, or as a timeout. false: it is not blocked.
func (b *blockedClients) unblock(id int64, asError bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.byID[id]
	if w == nil {
		return false
	}
	select {
	case w.unblock <- asError:
		return true
	default:
		return false // unblocked already
	}
}

// add puts w at the end of its keys' lines; false: MaxBlockedClients
// wait already.
func (b *blockedClients) add(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n.Load() >= int64(b.max) {
		return false
	}
	b.n.Add(1)
	b.byID[w.id] = w
	for _, k := range w.keys {
		b.lines[k] = append(b.lines[k], w)
	}
	return true
}

// remove takes w out of its lines and wakes the client now first in each
// line w was first in: what w left (or a wake w took and did not use) is
// that client's, and so are the pushers waiting for w (served).
func (b *blockedClients) remove(w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n.Add(-1)
	delete(b.byID, w.id)
	served := w.served
	w.served = nil
	for _, k := range w.keys {
		line := b.lines[k]
		i := slices.Index(line, w)
		if i < 0 {
			continue
		}
		line = slices.Delete(line, i, i+1)
		if len(line) == 0 {
			delete(b.lines, k)
			continue
		}
		b.lines[k] = line
		if i == 0 {
			line[0].notify()
			if !line[0].trying {
				line[0].served, served = append(line[0].served, served...), nil
			}
		}
	}
	for _, c := range served {
		close(c)
	}
}

// ready wakes the first client waiting on k, if any, and every client
// reading k (waiter.reads): k may have elements.
// The channel it returns (nil: nothing to wait for) closes once that
// client has tried, and the clients after it it handed elements on to:
// a push waits for it before answering, so that, as in Redis, the clients
// it serves through this node have popped before it answers. A client in
// a try is woken but not waited for: it may be the one pushing (BLMOVE
// into a key it waits on, or a cycle of them).
func (b *blockedClients) ready(k blockKey) <-chan struct{} {
	if b.n.Load() == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	line := b.lines[k]
	if len(line) == 0 {
		return nil
	}
	for _, r := range line[1:] {
		if r.reads {
			r.notify()
		}
	}
	w := line[0]
	w.notify()
	if w.trying {
		return nil
	}
	c := make(chan struct{})
	w.served = append(w.served, c)
	return c
}

// trying marks w in a try (on) or out of one; a try ended lets the
// pushers waiting for it go on.
func (b *blockedClients) trying(w *waiter, on bool) {
	b.mu.Lock()
	w.trying = on
	var served []chan struct{}
	if !on {
		served, w.served = w.served, nil
	}
	b.mu.Unlock()
	for _, c := range served {
		close(c)
	}
}

// first reports whether w is first in k's line; for w nil, whether no
// client waits on k.
func (b *blockedClients) first(w *waiter, k blockKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	line := b.lines[k]
	if w == nil {
		return len(line) == 0
	}
	return len(line) > 0 && line[0] == w
}

// count is how many clients are blocked.
func (b *blockedClients) count() int { return int(b.n.Load()) }

// blockTimers makes the timers a blocked client waits on: real ones, or
// in tests ones the test fires.
type blockTimers interface {
	newTimer(d time.Duration) blockTimer
}

type blockTimer interface {
	C() <-chan time.Time
	Stop() bool
}

type realTimers struct{}

func (realTimers) newTimer(d time.Duration) blockTimer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.Timer.C }

// ready tells the clients blocked on key through this node that it may
// have elements, now (and waits for them to have tried: blockedClients'
// ready), or inside EXEC once the transaction commits.
func (x *call) ready(key []byte) {
	if v, ok := x.kv.(*txView); ok {
		v.ready = append(v.ready, key)
		return
	}
	x.awaitServed(x.s.blocked.ready(blockKey{x.st.db, string(key)}))
}

// awaitServed waits for served to close, at most until the command's
// deadline: a client slow to try delays the push's answer, never its
// write.
func (x *call) awaitServed(served <-chan struct{}) {
	if served == nil {
		return
	}
	select {
	case <-served:
	case <-x.ctx.Done():
	case <-x.s.ctx.Done():
	}
}

// tryFunc is one try of a blocking command: it pops from the keys may
// allows and answers, reporting true, or answers nothing and reports
// false when there was nothing to pop. first: the try before the client
// waits, where a key of another type fails the command with WRONGTYPE as
// in Redis; later tries pass over it, as Redis leaves a client blocked on
// a key that became another type.
type tryFunc func(may func(key []byte) bool, first bool) bool

// block serves a blocking command over keys (above): try until a try
// answers, or answer with none after timeout (0: none); reads: the
// command reads its keys and takes nothing (XREAD, waiter.reads). Inside
// EXEC it never waits: nothing to pop answers none at once, as in Redis.
func (x *call) block(keys [][]byte, timeout time.Duration, reads bool, try tryFunc, none func()) {
	if _, inExec := x.kv.(*txView); inExec {
		if !try(func([]byte) bool { return true }, true) {
			none()
		}
		return
	}
	b := x.s.blocked
	key := func(k []byte) blockKey { return blockKey{x.st.db, string(k)} }
	if try(func(k []byte) bool { return b.first(nil, key(k)) }, true) {
		return
	}
	w := newWaiter(x.st.id, x.st.db, keys, reads)
	if !b.add(w) {
		x.c.WriteError(errMaxBlocked)
		return
	}
	defer b.remove(w)
	var expired <-chan time.Time
	if timeout > 0 {
		t := x.s.cfg.timers.newTimer(timeout)
		defer t.Stop()
		expired = t.C()
	}
	// The replies to the commands before this one in the pipeline go out
	// now, not when it ends.
	x.st.out.flush()
	// gone closes if the client disconnects while the command blocks.
	gone, unwatch := x.st.in.watch()
	defer unwatch()
	may := func(k []byte) bool { return b.first(w, key(k)) }
	defer x.endTry()
	for {
		// A try after the client registered: a push between the first
		// try and add woke nobody.
		x.renew()
		b.trying(w, true)
		if try(may, false) {
			return // remove hands the waiting pushers on
		}
		b.trying(w, false)
		recheck := x.s.cfg.timers.newTimer(x.s.cfg.BlockRecheck)
		select {
		case <-w.wake:
		case <-recheck.C():
		case <-expired:
			recheck.Stop()
			none()
			return
		case asError := <-w.unblock:
			recheck.Stop()
			if asError {
				x.c.WriteError("UNBLOCKED client unblocked via CLIENT UNBLOCK")
			} else {
				none()
			}
			return
		case <-gone:
			recheck.Stop()
			return
		case <-x.s.ctx.Done():
			recheck.Stop()
			return
		}
		recheck.Stop()
	}
}

// renew ends the command's context and gives it a new one, with a new
// RequestTimeout, for its next try: a blocked command's tries each get
// one, not the whole wait. A new cmdCtx, not x.cmd begun again: contexts
// the KV derived from the last one hold it and must find it ended (a
// derived context that found it done and then read no error panicked).
// A try arrives when it begins (Arrival): the wait before it was the
// client's asking, not a queue.
func (x *call) renew() {
	x.endTry()
	h := new(cmdCtx)
	x.st.cmds.begin(h, x.s.cfg.RequestTimeout)
	h.arrived = x.s.cfg.Now()
	x.ctx = h
}

// endTry ends the context of the command's last try.
func (x *call) endTry() {
	if h, ok := x.ctx.(*cmdCtx); ok {
		h.end()
	}
}

const (
	errTimeoutNotFloat = "ERR timeout is not a float or out of range"
	errTimeoutNegative = "ERR timeout is negative"
)

// parseTimeout reads a blocking command's timeout as Redis 7.0 does: a
// long double of seconds, times 1000 rounded up to whole milliseconds
// (0.0001 is 1 ms; -0.0001 is 0: no timeout). A product out of int64's
// range converts as on x86-64, to a negative number ("timeout is
// negative": inf, 1e400). ok false: it replied.
func (x *call) parseTimeout(arg []byte) (time.Duration, bool) {
	f, ok := parseLongDouble(arg)
	if !ok {
		x.c.WriteError(errTimeoutNotFloat)
		return 0, false
	}
	ms := int64(math.MinInt64)
	p := new(big.Float).SetPrec(longDoublePrec).SetMode(big.ToNearestEven).Mul(f, big.NewFloat(1000))
	if !p.IsInf() && p.Cmp(big.NewFloat(math.MaxInt64-1)) <= 0 && p.Cmp(big.NewFloat(math.MinInt64)) > 0 {
		v, acc := p.Int64() // toward zero
		if acc == big.Below {
			v++ // ceil of a positive fraction
		}
		ms = v
	}
	if ms < 0 {
		x.c.WriteError(errTimeoutNegative)
		return 0, false
	}
	// Past about 292 years a Duration overflows: that is no timeout (Redis
	// adds the time now, overflowing near int64's end).
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, true
	}
	return time.Duration(ms) * time.Millisecond, true
}
