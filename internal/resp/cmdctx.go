package resp

import (
	"context"
	"sync"
	"time"
)

// A command's context. Each command's KV calls get a context that ends at
// its deadline (RequestTimeout after it starts), when the server closes,
// when its connection closes, and when the command ends, as one from
// context.WithTimeout would; but context.WithTimeout costs five
// allocations a command (its context, timer and closures), a third of a
// GET's. Here a connection keeps one connContext for all its commands; a
// command's context is a cmdCtx, a handle stored in an object the command
// allocates anyway, naming the connContext and the command's generation.
// A handle of a command that has ended is done for good (Done closed, Err
// Canceled), whatever the connection runs next. The connection's timer is
// armed only for a command that asks for Done, and a Done channel is made
// only then; a command that only checks Err allocates nothing.

// connContext is the state shared by one connection's command contexts.
type connContext struct {
	parent context.Context // the server's: Close cancels every command
	stop   func() bool     // detaches from parent

	mu sync.Mutex
	// gen numbers the command running (running) or the last one run.
	gen     uint64
	running bool
	// closed: the connection is closed; a command begun later is canceled.
	closed   bool
	deadline time.Time
	// err: why the running command's context ended (nil: it has not).
	err error
	// done is the running command's Done, made when first asked for.
	done  chan struct{}
	timer *time.Timer // made on the connection's first Done
	armed bool        // timer set for the running command
	// afters: functions to call when the running command's context ends
	// (AfterFunc), by id.
	afters []afterFn
	nextFn uint64
}

type afterFn struct {
	id uint64
	f  func()
}

// closedChan is the Done of every ended command.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newConnContext(parent context.Context) *connContext {
	c := &connContext{parent: parent}
	c.stop = context.AfterFunc(parent, func() { c.end(0, parent.Err(), false) })
	return c
}

// begin starts a command bounded by timeout and sets h to its context.
func (c *connContext) begin(h *cmdCtx, timeout time.Duration) {
	now := time.Now()
	c.mu.Lock()
	c.gen++
	c.running, c.deadline, c.err = true, now.Add(timeout), nil
	switch {
	case c.closed:
		c.err = context.Canceled
	case c.parent.Err() != nil:
		c.err = c.parent.Err()
	}
	*h = cmdCtx{c: c, gen: c.gen, deadline: c.deadline}
	c.mu.Unlock()
}

// close ends the running command's context, if any, and every later
// one's: the connection is closed.
func (c *connContext) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.end(0, context.Canceled, false)
	c.stop()
}

// end ends the context of command gen (0: the running one, whichever it
// is) with err; finished: the command itself has returned.
func (c *connContext) end(gen uint64, err error, finished bool) {
	c.mu.Lock()
	if !c.running || (gen != 0 && gen != c.gen) {
		c.mu.Unlock()
		return
	}
	fns := c.expireLocked(err)
	if finished {
		c.running = false
		if c.armed {
			c.timer.Stop()
			c.armed = false
		}
	}
	c.mu.Unlock()
	for _, a := range fns {
		a.f()
	}
}

// expireLocked records err as why the running command's context ended,
// unless it already had, and returns the AfterFuncs to call (outside mu:
// they read Err).
func (c *connContext) expireLocked(err error) []afterFn {
	if c.err == nil {
		c.err = err
	}
	if c.done != nil {
		close(c.done)
		c.done = nil
	}
	fns := c.afters
	c.afters = nil
	return fns
}

// fire is the timer's: the command it was set for may have ended (gen)
// and another begun, whose deadline is later.
func (c *connContext) fire() {
	c.mu.Lock()
	if !c.running || time.Now().Before(c.deadline) {
		c.mu.Unlock()
		return
	}
	fns := c.expireLocked(context.DeadlineExceeded)
	c.mu.Unlock()
	for _, a := range fns {
		a.f()
	}
}

// endedLocked reports whether command gen's context has ended, finding
// its deadline passed (a command whose timer is not set learns of it
// here).
func (c *connContext) endedLocked(gen uint64) bool {
	if gen != c.gen || !c.running {
		return true
	}
	if c.err == nil && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
	return c.err != nil
}

// cmdCtx is one command's context.Context (see above).
type cmdCtx struct {
	c        *connContext
	gen      uint64
	deadline time.Time
	// arrived is when the bytes that completed the command were read off
	// its connection (Arrival); paced, whether the client sent them after
	// every earlier reply (Paced).
	arrived time.Time
	paced   bool
}

// end ends the command's context: it returned.
func (h *cmdCtx) end() { h.c.end(h.gen, context.Canceled, true) }

func (h *cmdCtx) Deadline() (time.Time, bool) { return h.deadline, true }

// Value holds the command's arrival only (Arrival): the server's context
// carries no values, and parent's cancellation must not be taken for this
// one's (context.Cause asks Value for it). The handle itself is the value,
// so that asking allocates nothing.
func (h *cmdCtx) Value(key any) any {
	if _, ok := key.(arrivalKey); ok {
		return h
	}
	return nil
}

type arrivalKey struct{}

// Arrival is when the bytes that completed ctx's command were read off its
// connection, zero for a context that is not a command's. The KV behind the
// server measures a command's queueing delay from it, as a node's admission
// does for its gRPC requests from their header's arrival: a command that
// waited behind its pipeline, or for a CPU, waited from then.
func Arrival(ctx context.Context) time.Time {
	if h, ok := ctx.Value(arrivalKey{}).(*cmdCtx); ok {
		return h.arrived
	}
	return time.Time{}
}

// Paced reports whether ctx's command was sent after its client had
// every earlier reply on the connection: the read that began its pipeline
// found nothing waiting. Such a client keeps at most a pipeline in flight
// per connection (a closed loop, pipelined or not), so the queue it makes
// is bounded by its connections; a client that sends ahead of its replies
// (an open loop) is not paced, nor is a blocked command's later try.
// The connection looks only while the node may shed (Config.Shedding);
// otherwise every command is paced.
func Paced(ctx context.Context) bool {
	if h, ok := ctx.Value(arrivalKey{}).(*cmdCtx); ok {
		return h.paced
	}
	return false
}

func (h *cmdCtx) Err() error {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen := h.gen; gen != c.gen || !c.running {
		return context.Canceled
	}
	c.endedLocked(h.gen)
	return c.err
}

func (h *cmdCtx) Done() <-chan struct{} {
	c := h.c
	c.mu.Lock()
	if c.endedLocked(h.gen) {
		var fns []afterFn
		if h.gen == c.gen && c.running {
			fns = c.expireLocked(c.err)
		}
		c.mu.Unlock()
		for _, a := range fns {
			a.f()
		}
		return closedChan
	}
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	c.armLocked()
	return c.done
}

// armLocked sets the timer for the running command's deadline.
func (c *connContext) armLocked() {
	if c.armed {
		return
	}
	d := time.Until(c.deadline)
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.fire)
	} else {
		c.timer.Reset(d)
	}
	c.armed = true
}

// AfterFunc arranges for f to run when the context ends, as
// context.AfterFunc does; a context derived from this one (WithCancel,
// WithTimeout) uses it instead of a goroutine of its own.
func (h *cmdCtx) AfterFunc(f func()) (stop func() bool) {
	c := h.c
	c.mu.Lock()
	if c.endedLocked(h.gen) {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.nextFn++
	id := c.nextFn
	c.afters = append(c.afters, afterFn{id: id, f: f})
	c.armLocked()
	gen := h.gen
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if gen != c.gen {
			return false
		}
		for i, a := range c.afters {
			if a.id == id {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}
