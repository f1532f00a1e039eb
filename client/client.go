package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/hlc"
)

// Client is a routing TideKV client. It is safe for concurrent use; share one
// per process.
type Client struct {
	cfg    Config
	cache  *rangeCache
	conns  *connPool
	sus    suspects
	ctx    context.Context // canceled by Close; bounds background refreshes
	cancel context.CancelFunc
	closed atomic.Bool
	// clock is the client's hybrid logical clock: Batch messages carry it
	// and their answers move it on, so that what the client does after an
	// answer is ordered after it (reads at timestamps will need it).
	clock *hlc.Clock

	refreshMu   sync.Mutex
	refreshing  *flight // the full refresh in progress, if any
	lastRefresh time.Time

	// Replica choice for BOUNDED and ANY reads (replicas.go).
	peers sync.Map                 // addr -> *peerStats
	loads atomic.Pointer[loadView] // latest node scores
	tune  readTuning
	pollState
}

// wallClock is the system clock the client's HLC reads.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// flight is one full cache refresh that concurrent callers share.
type flight struct {
	done chan struct{}
	err  error
}

// minRefreshInterval spaces full refreshes so that a burst of stale-cache
// errors under concurrency costs the cluster one Admin.Ranges call, not one
// per request.
const minRefreshInterval = 50 * time.Millisecond

// New returns a client for the cluster at cfg.Addrs. It validates cfg but does
// not contact the cluster: connections and the range cache are filled in on
// first use.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	clock, err := hlc.NewClock(wallClock{}, cfg.MaxClockOffset)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		clock:  clock,
		cfg:    cfg,
		cache:  newRangeCache(cfg.Addrs),
		ctx:    ctx,
		cancel: cancel,
		tune:   defaultReadTuning(),
	}
	c.conns = newConnPool(ctx, cfg, c.peer, clock)
	c.loads.Store(emptyLoadView)
	return c, nil
}

// Close releases the client's connections and stops its background load
// polling. Requests in flight fail; later requests return ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	c.pollMu.Lock()
	done := c.pollDone
	c.pollMu.Unlock()
	if done != nil {
		<-done
	}
	return c.conns.close()
}

// rpc describes one logical request for invoke.
type rpc struct {
	op string // for error messages
	// key routes the request; span, if set, are all the keys the request
	// touches, which must lie in the routed range.
	key  []byte
	span [][]byte
	// spanEnds are the (exclusive) ends of key spans the request reads
	// from keys in span, which must not pass the routed range's end (empty:
	// unbounded).
	spanEnds [][]byte
	// anyNode requests (admin) may go to any node.
	anyNode bool
	// idempotent requests may be retried after an unknown outcome.
	idempotent bool
	// noAttemptTimeout: attempts are bounded by ctx alone (admin operations
	// such as adding a replica can legitimately take long).
	noAttemptTimeout bool
	// read is a read's mode; the zero value (linearizable) also for writes.
	// BOUNDED and ANY reads go to the cheapest replica first.
	read ReadOption
	// call performs one attempt.
	call func(ctx context.Context, nc *nodeConn) error
	// served is what a read's call sets: the generation of the range's
	// descriptor at the replica that answered (0: not given). A newer one
	// than the cache's means the range changed without a routing error to
	// say so (placement added a replica, an adaptive learner), so the
	// range map is reloaded in the background.
	served uint64
}

// errSpanChanged: the keys of a multi-key request no longer lie in one cached
// range (the range split). The caller regroups or rejects the request.
var errSpanChanged = errors.New("tidekv: request keys span more than one range")

// invoke runs r with routing, redirects and retries until it succeeds, fails
// for good, runs out of attempts, or ctx ends.
func (c *Client) invoke(ctx context.Context, r *rpc) error {
	s := attempts{lastSentinel: ErrUnavailable, follow: r.read.follower() && !r.anyNode, start: time.Now()}
	if s.follow {
		c.startPoller()
	}
	// Admin operations with a deadline retry until it, through overload
	// and failover, rather than for a number of attempts: a split right
	// after a node died should wait for the cluster, not give up in a
	// second. The error then says how long it tried.
	maxAttempts := c.cfg.MaxAttempts
	if _, ok := ctx.Deadline(); ok && r.anyNode {
		maxAttempts = math.MaxInt
	}
	for s.attempt = 0; s.attempt < maxAttempts; s.attempt++ {
		if c.closed.Load() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			if r.anyNode && s.attempt > 1 {
				return ctxError(fmt.Sprintf("%s (%d attempts over %v)", r.op, s.attempt, time.Since(s.start).Round(time.Millisecond)), err, s.lastErr)
			}
			return ctxError(r.op, err, s.lastErr)
		}
		if len(s.avoid) > 8 {
			s.avoid = s.avoid[:0] // everything failed recently; start over
		}
		a, err := c.target(ctx, r, &s)
		if err != nil {
			return err
		}
		nc, err := c.conns.get(a.target)
		if err != nil {
			return fmt.Errorf("tidekv: %s: %w", r.op, err)
		}
		a.nc = nc
		if a.err = c.attemptOnce(ctx, r, &a); a.err == nil {
			c.sus.clear(a.target)
			if a.entry != nil && r.served > a.entry.desc.GetGeneration() {
				c.refreshAsync(a.epoch)
			}
			return nil
		}
		wait, retryNow, err := c.afterFailure(ctx, r, &s, &a)
		if err != nil {
			return err
		}
		if retryNow {
			continue
		}
		s.failures++
		if wait > 0 && !sleep(ctx, wait) {
			return ctxError(r.op, ctx.Err(), s.lastErr)
		}
	}
	return fmt.Errorf("%w: %s: giving up after %d attempts: %v", s.lastSentinel, r.op, c.cfg.MaxAttempts, s.lastErr)
}

// attempts is what invoke carries from one attempt to the next.
type attempts struct {
	attempt      int
	start        time.Time
	lastErr      error
	lastSentinel error    // what to wrap if attempts run out
	avoid        []string // nodes this request should not try again soon
	redirect     string   // leaseholder address a node pointed us to
	failures     int      // drives the backoff
	redirects    int      // consecutive redirects
	staleErrs    int
	// BOUNDED and ANY reads try replicas in order of cost while follow
	// holds, then fall back to leaseholder routing. tried marks the
	// replicas of triedEntry already tried by this request.
	follow     bool
	tried      uint64
	triedEntry *rangeEntry
}

// attempt is one try: where it went and how it ended.
type attempt struct {
	entry  *rangeEntry
	target string
	epoch  uint64
	chosen int // index of the replica picked by cost, or -1
	nc     *nodeConn
	sent   bool // the request left the client
	err    error
}

// target picks the node for the next attempt: a redirect, any node for
// admin calls, a replica by cost for relaxed reads, else the leaseholder.
func (c *Client) target(ctx context.Context, r *rpc, s *attempts) (attempt, error) {
	a := attempt{target: s.redirect, epoch: c.cache.load().epoch, chosen: -1}
	s.redirect = ""
	switch {
	case r.anyNode:
		if a.target == "" {
			a.target = c.pickAny(c.cache.load(), s.avoid, s.attempt)
		}
	case a.target != "":
		a.entry = c.cache.load().lookup(r.key)
	default:
		var err error
		if s.follow {
			if a.entry, a.target, a.epoch, a.chosen, err = c.routeFollower(ctx, r, &s.tried, &s.triedEntry); err != nil {
				return a, err
			}
			s.follow = a.chosen >= 0
		}
		if a.chosen < 0 {
			if a.entry, a.target, a.epoch, err = c.route(ctx, r, s.avoid, s.attempt); err != nil {
				return a, err
			}
		}
		if err := ctx.Err(); err != nil {
			return a, ctxError(r.op, err, s.lastErr)
		}
	}
	return a, nil
}

// attemptOnce sends r to a.nc, unless the client's window for the node
// refuses it or (for a non-idempotent request) the node is not connected.
func (c *Client) attemptOnce(ctx context.Context, r *rpc, a *attempt) error {
	nc := a.nc
	actx, cancel := c.attemptCtx(ctx)
	if r.noAttemptTimeout {
		actx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	// A relaxed read is held back only by a shedding node's window, and
	// goes to a replica at its window only if all are (peerStats.usable).
	windowed := !r.anyNode && (a.chosen < 0 || nc.peer.shedding.Load())
	if hint, refused := nc.peer.throttled(); refused && windowed {
		// The node is overloaded and this client already has as many
		// requests in flight to it as it may: refused here, as the
		// node would, without costing it anything.
		return overloadedHere(hint)
	}
	if !r.idempotent && !waitReady(actx, nc, c.cfg.DialTimeout) {
		// Not connected, so nothing was sent: safe to try elsewhere.
		return status.Errorf(codes.Unavailable, "cannot connect to %s", a.target)
	}
	if windowed && nc.peer.window.Load() != 0 {
		// The interceptor takes the request's place in the window
		// atomically: requests checked together above could all pass.
		// Without a window (the common case) there is nothing to take.
		actx = context.WithValue(actx, windowedKey{}, true)
	}
	a.sent = true
	var abandon *time.Timer
	if a.chosen >= 0 {
		abandon = c.abandonIfStalled(nc.peer, cancel)
	}
	err := r.call(actx, nc)
	if abandon != nil {
		abandon.Stop()
	}
	if full, ok := err.(windowFull); ok {
		a.sent = false
		return overloadedHere(full.hint)
	}
	return err
}

// afterFailure decides what a failed attempt leads to: an error that ends
// the request, another replica at once (retryNow), or a wait before the
// next attempt.
func (c *Client) afterFailure(ctx context.Context, r *rpc, s *attempts, a *attempt) (wait time.Duration, retryNow bool, err error) {
	s.lastErr = a.err
	st := status.Convert(a.err)
	d := errorDetail(st)
	class := classify(st, d)
	if cerr := ctxErr(ctx); cerr != nil {
		// Every earlier attempt was refused outright (anything else
		// returned already), so only this one can have done anything.
		if !r.idempotent && a.sent && !neverSent(st) && !refusedOutright(class, d) {
			return 0, false, fmt.Errorf("%w: %s: %w", ErrAmbiguous, r.op, cerr)
		}
		return 0, false, ctxError(r.op, cerr, a.err)
	}
	if r.anyNode && d == nil && class == classStale {
		// A bare FailedPrecondition from an admin operation is a refusal
		// (say, splitting at an existing boundary), not a routing hint.
		class = classFatal
	}
	if a.chosen >= 0 {
		if sentinel, ok := c.readFailover(class, d, r, a.entry, a.chosen, a.nc, a.sent, a.epoch); ok {
			// Another replica may well serve it: no backoff.
			s.lastSentinel = sentinel
			if a.chosen < 64 {
				s.tried |= 1 << uint(a.chosen)
			}
			return 0, true, nil
		}
		s.follow = false // anything else is handled as for any request
	}
	if class != classNotLeader {
		s.redirects = 0
	}
	switch class {
	case classInvalid:
		return 0, false, fmt.Errorf("%w: %s", ErrInvalidArgument, invalidReason(st))
	case classNotFound:
		return 0, false, fmt.Errorf("%w: %s", ErrNotFound, st.Message())
	case classTxnRetry:
		return 0, false, fmt.Errorf("%w: %s", ErrTxnRetry, st.Message())
	case classNotLeader, classStaleReplica:
		return c.afterNotLeader(s, a, d), false, nil
	case classStale:
		return c.afterStale(ctx, r, s, a, d), false, nil
	case classAmbiguous:
		if !r.idempotent {
			return 0, false, fmt.Errorf("%w: %s: %s", ErrAmbiguous, r.op, st.Message())
		}
		s.lastSentinel = ErrAmbiguous
		return c.backoff(s.failures), false, nil
	case classOverloaded:
		wait, err := c.afterOverloaded(ctx, r, s, a, st, d)
		return wait, false, err
	case classUnavailable:
		s.lastSentinel = ErrUnavailable
		c.markDown(a.nc, 0)
		s.avoid = append(s.avoid, a.target)
		return c.backoff(s.failures), false, nil
	case classTransport:
		if c.closed.Load() {
			return 0, false, ErrClosed
		}
		if !r.idempotent && a.sent && !neverSent(st) {
			return 0, false, fmt.Errorf("%w: %s: %v", ErrAmbiguous, r.op, a.err)
		}
		s.lastSentinel = ErrUnavailable
		c.markDown(a.nc, 0)
		s.avoid = append(s.avoid, a.target)
		// Another replica is likely healthy: try it at once, then back off.
		if s.failures > 0 {
			return c.backoff(s.failures), false, nil
		}
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("tidekv: %s: %w", r.op, a.err)
}

// afterNotLeader follows a redirect to the leaseholder a node named, or
// avoids the node and pauses when none is known. A stale replica reached
// by leaseholder routing (no leaseholder known) points at the leaseholder
// like a redirect.
func (c *Client) afterNotLeader(s *attempts, a *attempt, d *tidekvpb.ErrorDetail) time.Duration {
	s.lastSentinel = ErrUnavailable
	if e := c.cache.update(d.GetRange(), d.GetLeaderNodeId(), d.GetLeaderAddr()); e == nil && a.entry != nil && d.GetLeaderNodeId() != 0 {
		a.entry.leader.Store(d.GetLeaderNodeId())
	}
	addr := d.GetLeaderAddr()
	if addr == "" && d.GetLeaderNodeId() != 0 {
		addr = c.cache.load().nodes[d.GetLeaderNodeId()]
	}
	if addr != "" && addr != a.target && !c.sus.is(addr) {
		s.redirect = addr
		s.redirects++
		if s.redirects > 2 {
			// Nodes with different views bounce us around: slow down
			// until the lease settles.
			return c.backoff(s.failures)
		}
		return 0
	}
	// Election in progress, or the named leaseholder is down: ask
	// another replica after a pause.
	if a.entry != nil && c.cache.load().nodes[a.entry.leader.Load()] == a.target {
		a.entry.leader.Store(0)
	}
	s.avoid = append(s.avoid, a.target)
	return c.backoff(s.failures)
}

// afterStale refreshes the routing a node said was out of date.
func (c *Client) afterStale(ctx context.Context, r *rpc, s *attempts, a *attempt, d *tidekvpb.ErrorDetail) time.Duration {
	s.lastSentinel = ErrUnavailable
	if d.GetRange() != nil {
		c.cache.update(d.GetRange(), d.GetLeaderNodeId(), d.GetLeaderAddr())
	} else if !r.anyNode {
		_ = c.refresh(ctx, a.epoch) // on failure the next attempt still has somewhere to go
	}
	if d.GetKind() != tidekvpb.ErrorKind_KEY_MISMATCH {
		s.avoid = append(s.avoid, a.target) // it has no replica of this range
	}
	var wait time.Duration
	if s.staleErrs > 0 {
		wait = c.backoff(s.failures)
	}
	s.staleErrs++
	return wait
}

// afterOverloaded waits as a refusal asks, up to twice its hint, unless
// that would overrun the deadline or the caller wants refusals at once.
func (c *Client) afterOverloaded(ctx context.Context, r *rpc, s *attempts, a *attempt, st *status.Status, d *tidekvpb.ErrorDetail) (time.Duration, error) {
	s.lastSentinel = ErrOverloaded
	hint := time.Duration(d.GetRetryAfterMs()) * time.Millisecond
	if d.GetKind() != tidekvpb.ErrorKind_RANGE_BUSY {
		a.nc.peer.refused(monoNow(), d, a.sent) // only the node's own load narrows its window
	}
	if c.cfg.FailFastOnOverload && !r.anyNode {
		return 0, &OverloadedError{Op: r.op, RetryAfter: hint, Reason: st.Message()}
	}
	// Up to twice the hint: the clients a node refused together
	// should not all come back together.
	wait := hint + rand.N(hint+1)
	if b := c.backoff(s.failures); wait == 0 || (r.anyNode && b > wait) {
		// Admin calls back off further than the hint: they have
		// until their deadline and should not add to the load.
		wait = b
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		// Waiting as asked would overrun the deadline: say so now
		// rather than sleep into it.
		if r.anyNode {
			return 0, fmt.Errorf("%w: %s: %d attempts over %v, the last asked to retry after %v: %w", ErrOverloaded, r.op,
				s.attempt+1, time.Since(s.start).Round(time.Millisecond), wait.Round(time.Millisecond), context.DeadlineExceeded)
		}
		return 0, fmt.Errorf("%w: %s: server asked to retry after %v: %w", ErrOverloaded, r.op, wait, context.DeadlineExceeded)
	}
	return wait, nil
}

// route finds the cached range for r and the node to send it to, refreshing
// the cache on a miss. It also returns the cache epoch it routed with, so a
// later stale-cache error refreshes only if nobody has since.
func (c *Client) route(ctx context.Context, r *rpc, avoid []string, attempt int) (*rangeEntry, string, uint64, error) {
	s := c.cache.load()
	e := s.lookup(r.key)
	if e == nil {
		// A failed refresh is not fatal: the request then goes to any node,
		// whose answer or error detail tells us more.
		_ = c.refresh(ctx, s.epoch)
		s = c.cache.load()
		e = s.lookup(r.key)
	}
	if e == nil {
		return nil, c.pickAny(s, avoid, attempt), s.epoch, nil
	}
	if !e.holds(r) {
		return nil, "", 0, errSpanChanged
	}
	if t := c.pickReplica(s, e, avoid, attempt); t != "" {
		return e, t, s.epoch, nil
	}
	// None of the replicas' nodes has a known address: the node list is stale.
	_ = c.refresh(ctx, s.epoch)
	s = c.cache.load()
	if t := c.pickReplica(s, e, avoid, attempt); t != "" {
		return e, t, s.epoch, nil
	}
	return e, c.pickAny(s, avoid, attempt), s.epoch, nil
}

// routeFollower picks the replica a BOUNDED or ANY read tries next, by
// cost (chooseReplica). chosen is -1 when no replica is eligible, or the
// range is not cached even after a refresh: the caller then routes as for a
// linearizable read, to the leaseholder.
func (c *Client) routeFollower(ctx context.Context, r *rpc, tried *uint64, triedEntry **rangeEntry) (e *rangeEntry, target string, epoch uint64, chosen int, err error) {
	s := c.cache.load()
	if e = s.lookup(r.key); e == nil {
		_ = c.refresh(ctx, s.epoch)
		s = c.cache.load()
		if e = s.lookup(r.key); e == nil {
			return nil, "", s.epoch, -1, nil
		}
	}
	if !e.holds(r) {
		return nil, "", 0, -1, errSpanChanged
	}
	if e != *triedEntry {
		// A new descriptor: replica indexes mean something else now.
		*tried, *triedEntry = 0, e
	}
	refs := c.replicasOf(s, e)
	bound := r.read.MaxStaleness()
	if bound == 0 {
		bound = anyBound
	}
	in := pickInput{
		refs:        refs,
		stale:       e.stale,
		loads:       c.loads.Load(),
		rttWeight:   c.cfg.RTTWeight,
		bound:       bound,
		now:         monoNow(),
		stallAfter:  int64(c.tune.stallAfter),
		rttHalfLife: int64(c.tune.rttHalfLife),
		probeAfter:  int64(c.tune.probeAfter),
		turn:        e.turn.Add(1),
		skip:        *tried,
	}
	if i := chooseReplica(&in); i >= 0 {
		return e, refs[i].addr, s.epoch, i, nil
	}
	return e, "", s.epoch, -1, nil
}

// readFailover handles a failed attempt of a BOUNDED or ANY read at the
// replica chosen by cost. For the failures another replica can be expected
// not to share (stale, overloaded, unavailable, unreachable, no replica of
// the range) it records what it learnt and reports ok: the caller tries the
// next replica at once. Anything else (NOT_LEASEHOLDER from a server that
// ignores read modes, invalid arguments, ...) is left to the general rules.
// sent says whether the attempt reached the node at all.
func (c *Client) readFailover(class errClass, d *tidekvpb.ErrorDetail, r *rpc, e *rangeEntry, chosen int, nc *nodeConn, sent bool, epoch uint64) (sentinel error, ok bool) {
	now := monoNow()
	switch class {
	case classStaleReplica:
		if chosen < len(e.stale) {
			e.stale[chosen].set(now, c.tune.staleHintFor, r.read.MaxStaleness())
		}
		if id := d.GetLeaderNodeId(); id != 0 {
			// Where the leaseholder phase will go, if it comes to that.
			c.cache.update(nil, id, d.GetLeaderAddr())
			e.leader.Store(id)
		}
		return ErrUnavailable, true
	case classOverloaded:
		nc.peer.refused(now, d, sent)
		return ErrOverloaded, true
	case classUnavailable, classTransport:
		c.markDown(nc, 0)
		return ErrUnavailable, true
	case classStale:
		// The node has no replica covering the key: our descriptor is old.
		// Learn from the detail, or else skip the node for this range and
		// refresh in the background rather than hold up a read another
		// replica can serve.
		if d.GetRange() != nil {
			c.cache.update(d.GetRange(), d.GetLeaderNodeId(), d.GetLeaderAddr())
		} else {
			if chosen < len(e.stale) {
				e.stale[chosen].set(now, c.tune.staleHintFor, anyBound)
			}
			c.refreshAsync(epoch)
		}
		return ErrUnavailable, true
	}
	return nil, false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pickReplica chooses where to send a request for e: the presumed
// leaseholder, else a voter (rotating with the attempt so retries spread),
// else a learner, which can at least say who the leaseholder is. Suspect and
// avoided nodes come last. It returns "" when no replica's address is known.
func (c *Client) pickReplica(s *snapshot, e *rangeEntry, avoid []string, attempt int) string {
	if id := e.leader.Load(); id != 0 {
		if a := s.nodes[id]; a != "" && !contains(avoid, a) && !c.sus.is(a) {
			return a
		}
	}
	reps := e.desc.GetReplicas()
	n := len(reps)
	for _, learners := range []bool{false, true} {
		for i := 0; i < n; i++ {
			rd := reps[(i+attempt)%n]
			if (rd.GetType() == tidekvpb.ReplicaType_LEARNER) != learners {
				continue
			}
			if a := s.nodes[rd.GetNodeId()]; a != "" && !contains(avoid, a) && !c.sus.is(a) {
				return a
			}
		}
	}
	// Everything is suspect or avoided: trying one beats stalling.
	for i := 0; i < n; i++ {
		if a := s.nodes[reps[(i+attempt)%n].GetNodeId()]; a != "" {
			return a
		}
	}
	return ""
}

// pickAny chooses a node for requests any node can serve, preferring seeds.
func (c *Client) pickAny(s *snapshot, avoid []string, attempt int) string {
	n := len(s.addrs)
	for i := 0; i < n; i++ {
		if a := s.addrs[(i+attempt)%n]; !contains(avoid, a) && !c.sus.is(a) {
			return a
		}
	}
	return s.addrs[attempt%n]
}

// refresh reloads the whole range map from Admin.Ranges unless a refresh
// newer than seen (a snapshot epoch) has completed. Concurrent callers share
// one in-flight refresh, and refreshes are spaced minRefreshInterval apart.
func (c *Client) refresh(ctx context.Context, seen uint64) error {
	c.refreshMu.Lock()
	if c.cache.load().epoch > seen {
		c.refreshMu.Unlock()
		return nil
	}
	f := c.refreshing
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.refreshing = f
		go c.runRefresh(f, time.Until(c.lastRefresh.Add(minRefreshInterval)))
	}
	c.refreshMu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refreshAsync starts a refresh like refresh but does not wait for it.
func (c *Client) refreshAsync(seen uint64) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if c.cache.load().epoch > seen || c.refreshing != nil || c.closed.Load() {
		return
	}
	f := &flight{done: make(chan struct{})}
	c.refreshing = f
	go c.runRefresh(f, time.Until(c.lastRefresh.Add(minRefreshInterval)))
}

// runRefresh runs detached from any one caller's context so that a caller
// giving up does not fail the refresh for the others waiting on it.
func (c *Client) runRefresh(f *flight, delay time.Duration) {
	if delay > 0 {
		sleep(c.ctx, delay)
	}
	c.refreshMu.Lock()
	c.lastRefresh = time.Now()
	c.refreshMu.Unlock()

	resp, err := c.fetchRanges(c.ctx)
	if err == nil {
		c.cache.install(resp)
	}
	c.refreshMu.Lock()
	c.refreshing = nil
	f.err = err
	c.refreshMu.Unlock()
	close(f.done)
}

// fetchRanges asks the known nodes, healthy ones first, for the range map.
func (c *Client) fetchRanges(ctx context.Context) (*tidekvpb.RangesResponse, error) {
	s := c.cache.load()
	order := make([]string, 0, len(s.addrs))
	for _, a := range s.addrs {
		if !c.sus.is(a) {
			order = append(order, a)
		}
	}
	for _, a := range s.addrs {
		if c.sus.is(a) {
			order = append(order, a)
		}
	}
	var (
		lastErr error
		empty   *tidekvpb.RangesResponse
	)
	for _, a := range order {
		if ctx.Err() != nil {
			break
		}
		nc, err := c.conns.get(a)
		if err != nil {
			return nil, err
		}
		actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
		resp, err := nc.admin.Ranges(actx, &tidekvpb.RangesRequest{})
		cancel()
		if err != nil {
			lastErr = err
			if cl := classify(status.Convert(err), nil); cl == classTransport || cl == classUnavailable {
				c.sus.mark(a)
			}
			continue
		}
		c.sus.clear(a)
		if len(resp.GetRanges()) > 0 {
			return resp, nil
		}
		// A node that has not caught up with the meta range yet may know
		// nothing; prefer another node's answer.
		empty = resp
	}
	if empty != nil {
		return empty, nil
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	return nil, fmt.Errorf("%w: fetching range descriptors: %v", ErrUnavailable, lastErr)
}

// attemptCtx bounds one attempt by AttemptTimeout unless ctx ends sooner.
func (c *Client) attemptCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= c.cfg.AttemptTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.AttemptTimeout)
}

// backoff returns the jittered exponential delay after n failures: a random
// duration in [d/2, d] where d = MinBackoff*2^n capped at MaxBackoff. The
// jitter keeps clients that failed together from retrying together.
func (c *Client) backoff(n int) time.Duration {
	d := c.cfg.MaxBackoff
	if n < 32 {
		if x := c.cfg.MinBackoff << n; x > 0 && x < d {
			d = x
		}
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits for d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ctxErr is ctx.Err(), but also reports a deadline that has passed before its
// timer fired: the server's copy of the deadline can end the attempt first,
// and that failure belongs to the caller's deadline, not to the node.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func ctxError(op string, ctxErr, lastErr error) error {
	if lastErr != nil {
		return fmt.Errorf("tidekv: %s: %w (last error: %v)", op, ctxErr, lastErr)
	}
	return fmt.Errorf("tidekv: %s: %w", op, ctxErr)
}
