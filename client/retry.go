package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

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
		return 0, false, s.ctxError(r, s.attempt+1, cerr, a.err)
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
		if ts := d.GetUncertainTimestamp(); ts != nil {
			return 0, false, &UncertainReadError{Timestamp: ts.HLC(), Reason: st.Message()}
		}
		return 0, false, fmt.Errorf("%w: %s", ErrTxnRetry, st.Message())
	case classTxnCommitted:
		return 0, false, fmt.Errorf("%w: %s", ErrTxnCommitted, st.Message())
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
