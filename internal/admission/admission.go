package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Priority orders client requests when the node must refuse some.
type Priority int8

const (
	// Normal is foreground work: the default.
	Normal Priority = iota
	// Background is bulk work (loads, backfills) that yields to Normal:
	// refused whenever the node is overloaded, and held to a share of the
	// in-flight slots.
	Background
	// High is never shed by queueing delay, only bounded by MaxInflight:
	// requests a client marks as ones that must not be refused for load
	// (PRIORITY_HIGH).
	High
)

// Reason says why a request was refused.
type Reason int

const (
	// Inflight: MaxInflight requests were already in progress.
	Inflight Reason = iota
	// Shed: refused at arrival while the node admits only a share.
	Shed
	// Delay: it waited too long before its work could start.
	Delay
	// Deferred: a background request while foreground work needs the node.
	Deferred
	numReasons
)

var reasonNames = [numReasons]string{"inflight", "shed", "queue-delay", "background"}

func (r Reason) String() string { return reasonNames[r] }

// Reasons lists every Reason, for metrics.
func Reasons() []Reason { return []Reason{Inflight, Shed, Delay, Deferred} }

// Config is the node's admission policy.
type Config struct {
	// MaxInflight is the hard cap on client requests in progress.
	MaxInflight int
	// Target is the queueing delay the node tolerates as standing: when
	// the Quantile of an Interval's delays exceeds it, the node is
	// overloaded. 0 turns delay-based admission off (MaxInflight only).
	Target time.Duration
	// Interval is the window over which the delays are taken, and the
	// longest any request may wait before its work starts.
	Interval time.Duration
	// Quantile of a window's delays compared with Target, in (0,1). CoDel
	// takes the minimum, which is the standing queue of a FIFO; requests
	// here wait as goroutines, which the Go scheduler does not run in
	// arrival order (the newest runs next), so some start at once however
	// long the others wait and the minimum stays low. The median does not.
	Quantile float64
	// MinAdmitShare is the smallest share of new requests the gate admits
	// however overloaded the node is, in (0,1]: the delay of the admitted
	// ones is what tells the node when the overload ends.
	MinAdmitShare float64
	// BackgroundShare is the share of MaxInflight background requests may
	// hold, in (0,1].
	BackgroundShare float64
	// MaxRetryAfter bounds the retry hint given with a refusal.
	MaxRetryAfter time.Duration
	// MinInflight is the fewest requests queued or in progress for which
	// the node sheds by delay, as CoDel never drops from a nearly empty
	// queue: with fewer, the queue is no deeper than a pool of clients
	// each waiting for its answer, whose delay comes from the machine
	// (other processes, a saturated CPU) rather than from work piling up,
	// and refusing them only turns that pool's concurrency into errors.
	// The count is the larger of the requests in progress and the last
	// window's queue by Little's law (requests started a second × their
	// median queueing delay): a cached read is in progress for
	// microseconds, so reads queued for a CPU are all but absent from the
	// first count, while a closed pool of N clients can never have more
	// than N waiting by the second. 0 sheds at any count.
	MinInflight int
}

// DefaultConfig returns the defaults: 4,096 requests in flight, a 10 ms
// target for the median over 100 ms windows (CoDel's ratio), 5% minimum
// admitted, a quarter of the slots for background work, hints of at most
// 1 s, no shedding below 64 requests in progress (redis-benchmark's 50
// connections, go-ycsb's 32 threads).
func DefaultConfig() Config {
	return Config{MaxInflight: 4096, Target: 10 * time.Millisecond, Interval: 100 * time.Millisecond, Quantile: 0.5,
		MinAdmitShare: 0.05, BackgroundShare: 0.25, MaxRetryAfter: time.Second, MinInflight: 64}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.MaxInflight <= 0:
		return errors.New("admission: MaxInflight must be positive")
	case c.Target < 0:
		return errors.New("admission: Target must not be negative (0 turns delay-based admission off)")
	case c.Interval <= 0:
		return errors.New("admission: Interval must be positive")
	case c.Target >= c.Interval:
		return fmt.Errorf("admission: Target (%v) must be below Interval (%v)", c.Target, c.Interval)
	case !(c.Quantile > 0 && c.Quantile < 1):
		return errors.New("admission: Quantile must be in (0,1)")
	case !(c.MinAdmitShare > 0 && c.MinAdmitShare <= 1):
		return errors.New("admission: MinAdmitShare must be in (0,1]")
	case !(c.BackgroundShare > 0 && c.BackgroundShare <= 1):
		return errors.New("admission: BackgroundShare must be in (0,1]")
	case c.MaxRetryAfter <= 0:
		return errors.New("admission: MaxRetryAfter must be positive")
	case c.MinInflight < 0:
		return fmt.Errorf("admission: MinInflight (%d) must not be negative (at or above MaxInflight, nothing is shed by delay)", c.MinInflight)
	}
	return nil
}

// Rejection is a refusal: the request was not started and may be retried.
type Rejection struct {
	Reason     Reason
	RetryAfter time.Duration
	// Waited is how long the request had queued (Delay only).
	Waited time.Duration
	// Share is the share of new requests being admitted (Shed only).
	Share  float64
	Target time.Duration
	Limit  int
}

func (r *Rejection) Error() string {
	var why string
	switch r.Reason {
	case Inflight:
		why = fmt.Sprintf("%d requests already in progress", r.Limit)
	case Shed:
		why = fmt.Sprintf("its queueing delay stays above %v, so it admits %.0f%% of new requests", r.Target, 100*r.Share)
	case Delay:
		why = fmt.Sprintf("the request waited %v before it could start", r.Waited.Round(10*time.Microsecond))
	case Deferred:
		why = "background requests wait while foreground work needs the node"
	}
	return fmt.Sprintf("node overloaded (%s), retry after %v", why, r.RetryAfter)
}

// Controller admits or refuses requests; safe for concurrent use.
type Controller struct {
	cfg  Config
	now  func() time.Time
	rand func() float64

	inflight, background atomic.Int64
	// queued is the last window's queue by Little's law (MinInflight).
	queued     atomic.Int64
	shareBits  atomic.Uint64 // float64: share admitted at the gate
	overloaded atomic.Bool

	mu        sync.Mutex
	windowEnd time.Time
	window    delayHistogram // this window's measured delays
	sched     time.Duration  // the scheduler's latest run-queue latency
	lastDelay time.Duration  // the previous window's Quantile (< 0: none measured)

	admitted atomic.Uint64
	rejected [numReasons]atomic.Uint64
	// observe, when set, is told every measured queueing delay.
	observe func(time.Duration)
}

// New returns a Controller reading time from now and drawing from rnd
// (uniform in [0,1)); nil rnd uses math/rand/v2.
func New(cfg Config, now func() time.Time, rnd func() float64) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	c := &Controller{cfg: cfg, now: now, rand: rnd, lastDelay: -1}
	c.shareBits.Store(math.Float64bits(1))
	c.windowEnd = now().Add(cfg.Interval)
	return c, nil
}

// OnDelay installs a hook told of every measured queueing delay (metrics);
// call it before the first request.
func (c *Controller) OnDelay(f func(time.Duration)) { c.observe = f }

func (c *Controller) share() float64 { return math.Float64frombits(c.shareBits.Load()) }

// deepQueue says at least MinInflight requests are queued or in progress.
// MayShed reports whether a normal request arriving now could be shed
// by delay: delay admission is on and the queue is not nearly empty
// (MinInflight).
func (c *Controller) MayShed() bool { return c.cfg.Target != 0 && c.deepQueue() }

func (c *Controller) deepQueue() bool {
	return max(c.inflight.Load(), c.queued.Load()) >= int64(c.cfg.MinInflight)
}

// Gate is the check at arrival, before the request's payload is read: it
// must cost next to nothing. While the node is overloaded it admits a
// share of normal requests and no background ones.
func (c *Controller) Gate(p Priority) error {
	if c.cfg.Target == 0 || p == High || !c.deepQueue() {
		return nil
	}
	if p == Background && c.overloaded.Load() {
		return c.refuse(Deferred, 0)
	}
	if s := c.share(); s < 1 && c.rand() >= s {
		return c.refuse(Shed, 0)
	}
	return nil
}

// Admit is the check when the request's work is about to start. arrival
// is when its header reached the node (zero when unknown: the request is
// then not measured), and gated says Gate already passed it. On nil the
// caller must call Done(p) when the work ends.
func (c *Controller) Admit(p Priority, arrival time.Time, gated bool) error {
	if c.cfg.Target > 0 {
		if !arrival.IsZero() {
			waited := max(c.now().Sub(arrival), 0)
			c.measure(waited)
			if p != High && c.deepQueue() && (waited > c.cfg.Interval || (waited > c.cfg.Target && c.overloaded.Load())) {
				return c.refuse(Delay, waited)
			}
		}
		if !gated {
			if err := c.Gate(p); err != nil {
				return err
			}
		}
	}
	if c.inflight.Add(1) > int64(c.cfg.MaxInflight) {
		c.inflight.Add(-1)
		return c.refuse(Inflight, 0)
	}
	if p == Background && c.background.Add(1) > int64(math.Ceil(c.cfg.BackgroundShare*float64(c.cfg.MaxInflight))) {
		c.background.Add(-1)
		c.inflight.Add(-1)
		return c.refuse(Deferred, 0)
	}
	c.admitted.Add(1)
	return nil
}

// Observe measures the queueing delay of a request admitted without
// Admit's delay check (one that refusing would not relieve).
func (c *Controller) Observe(arrival time.Time) {
	if c.cfg.Target > 0 {
		c.measure(max(c.now().Sub(arrival), 0))
	}
}

// Done ends a request Admit admitted.
func (c *Controller) Done(p Priority) {
	if p == Background {
		c.background.Add(-1)
	}
	c.inflight.Add(-1)
}

// Tick closes the window if its time is up, with the scheduler's latest
// run-queue latency: the server calls it every Interval so that the state
// moves on even when no request arrives.
func (c *Controller) Tick(schedLatency time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sched = schedLatency
	c.rollLocked(c.now())
}

func (c *Controller) measure(waited time.Duration) {
	if c.observe != nil {
		c.observe(waited)
	}
	c.mu.Lock()
	c.window.add(waited)
	c.rollLocked(c.now())
	c.mu.Unlock()
}

// rollLocked ends the window at now, if due: a standing queue (the
// window's Quantile, or the scheduler's run queue, above Target) cuts the
// admitted share by 30%, a good window gives back a tenth.
func (c *Controller) rollLocked(now time.Time) {
	if now.Before(c.windowEnd) {
		return
	}
	delay := c.window.quantile(c.cfg.Quantile)
	standing := c.cfg.Target > 0 && (delay > c.cfg.Target || c.sched > c.cfg.Target)
	s := c.share()
	if standing {
		s = max(c.cfg.MinAdmitShare, s*0.7)
	} else {
		s = min(1, s+0.1)
	}
	c.shareBits.Store(math.Float64bits(s))
	c.overloaded.Store(standing)
	// Little's law over the window's span (longer than Interval when no
	// request rolled it on time).
	span := now.Sub(c.windowEnd.Add(-c.cfg.Interval))
	c.queued.Store(int64(float64(c.window.n) * max(delay, 0).Seconds() / span.Seconds()))
	c.lastDelay = delay
	c.window = delayHistogram{}
	c.windowEnd = now.Add(c.cfg.Interval)
}

// retryAfter grows as the admitted share shrinks: at half admitted a
// client should stay away for about an Interval.
func (c *Controller) retryAfter() time.Duration {
	s := c.share()
	d := time.Duration(float64(c.cfg.Interval) * (1 - s) / s)
	return min(max(d, 10*time.Millisecond), c.cfg.MaxRetryAfter)
}

func (c *Controller) refuse(r Reason, waited time.Duration) *Rejection {
	c.rejected[r].Add(1)
	return &Rejection{Reason: r, RetryAfter: c.retryAfter(), Waited: waited, Share: c.share(), Target: c.cfg.Target, Limit: c.cfg.MaxInflight}
}

// State is what the node shows of its admission.
type State struct {
	Overloaded bool
	// AdmitShare is the share of new normal requests admitted at the gate.
	AdmitShare float64
	// QueueDelay is the Quantile of the last full window's queueing
	// delays (-1 when no request was measured in it).
	QueueDelay   time.Duration
	SchedLatency time.Duration
	Inflight     int
	Admitted     uint64
	Rejected     [numReasons]uint64
}

// State returns a snapshot.
func (c *Controller) State() State {
	c.mu.Lock()
	st := State{QueueDelay: c.lastDelay, SchedLatency: c.sched}
	c.mu.Unlock()
	st.Overloaded, st.AdmitShare = c.overloaded.Load(), c.share()
	st.Inflight, st.Admitted = int(c.inflight.Load()), c.admitted.Load()
	for i := range st.Rejected {
		st.Rejected[i] = c.rejected[i].Load()
	}
	return st
}

// RejectedTotal sums refusals over every reason.
func (s State) RejectedTotal() uint64 {
	var n uint64
	for _, v := range s.Rejected {
		n += v
	}
	return n
}

type arrivalKey struct{}

type arrival struct {
	at    time.Time
	p     Priority
	gated bool
}

// arrivalCtx carries an arrival as a value: context.WithValue would box
// it into an interface, an allocation of its own besides the context's,
// on every request (a Redis GET's included).
type arrivalCtx struct {
	context.Context
	a arrival
}

// Value answers arrivalKey with the context itself, a pointer, so that
// asking allocates nothing either.
func (c *arrivalCtx) Value(key any) any {
	if _, ok := key.(arrivalKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// WithArrival records on ctx when the request reached the node, its
// priority and whether Gate passed it, for Admit later on the request's
// path.
func WithArrival(ctx context.Context, at time.Time, p Priority, gated bool) context.Context {
	return &arrivalCtx{Context: ctx, a: arrival{at: at, p: p, gated: gated}}
}

// ArrivalOf returns what WithArrival recorded (a zero time, Normal and not
// gated when nothing was).
func ArrivalOf(ctx context.Context) (at time.Time, p Priority, gated bool) {
	if c, ok := ctx.Value(arrivalKey{}).(*arrivalCtx); ok {
		return c.a.at, c.a.p, c.a.gated
	}
	return time.Time{}, Normal, false
}
