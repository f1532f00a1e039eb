package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// flight is one full cache refresh that concurrent callers share.
type flight struct {
	done chan struct{}
	err  error
}

// minRefreshInterval spaces full refreshes so that a burst of stale-cache
// errors under concurrency costs the cluster one Admin.Ranges call, not one
// per request.
const minRefreshInterval = 50 * time.Millisecond

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
