package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
			return s.ctxError(r, s.attempt, err, s.lastErr)
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
		if wait > 0 && !c.pause(ctx, wait) {
			return s.ctxError(r, s.attempt+1, ctx.Err(), s.lastErr)
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

// ctxError is the error of r ended by its context after made attempts:
// an admin operation, which retries until its deadline, says how many it
// made and for how long, wherever the deadline found it (between
// attempts, in a backoff, routing the next one).
func (s *attempts) ctxError(r *rpc, made int, err, last error) error {
	if r.anyNode && made > 1 {
		return ctxError(fmt.Sprintf("%s (%d attempts over %v)", r.op, made, time.Since(s.start).Round(time.Millisecond)), err, last)
	}
	return ctxError(r.op, err, last)
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
			return a, s.ctxError(r, s.attempt, err, s.lastErr)
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

// attemptCtx bounds one attempt by AttemptTimeout unless ctx ends sooner.
func (c *Client) attemptCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= c.cfg.AttemptTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.AttemptTimeout)
}
