package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Ranges returns every range descriptor with its last reported leaseholder,
// and the cluster's nodes. The answer also refreshes the routing cache.
func (c *Client) Ranges(ctx context.Context) (*tidekvpb.RangesResponse, error) {
	var resp *tidekvpb.RangesResponse
	err := c.invoke(ctx, &rpc{op: "ranges", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.Ranges(ctx, &tidekvpb.RangesRequest{})
			return err
		}})
	if err != nil {
		return nil, err
	}
	if len(resp.GetRanges()) > 0 {
		c.cache.install(resp)
	}
	return resp, nil
}

// Status returns the cluster-wide node status.
func (c *Client) Status(ctx context.Context) (*tidekvpb.StatusResponse, error) {
	var resp *tidekvpb.StatusResponse
	err := c.invoke(ctx, &rpc{op: "status", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.Status(ctx, &tidekvpb.StatusRequest{})
			return err
		}})
	return resp, err
}

// Events returns the cluster's recent events (every reachable node's,
// merged), oldest first; limit > 0 keeps the newest limit.
func (c *Client) Events(ctx context.Context, limit int) ([]*tidekvpb.Event, error) {
	var resp *tidekvpb.EventsResponse
	err := c.invoke(ctx, &rpc{op: "events", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.Events(ctx, &tidekvpb.EventsRequest{Limit: uint32(max(limit, 0))})
			return err
		}})
	return resp.GetEvents(), err
}

// Decommission starts (drain=true) or cancels (drain=false) the
// decommissioning of a node and returns how many replicas it still holds:
// 0 means it owns nothing and may be stopped.
func (c *Client) Decommission(ctx context.Context, node uint64, drain bool) (int, error) {
	var resp *tidekvpb.DecommissionResponse
	err := c.invoke(ctx, &rpc{op: "decommission", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.Decommission(ctx, &tidekvpb.DecommissionRequest{NodeId: node, Drain: drain})
			return err
		}})
	return int(resp.GetReplicas()), err
}

// Settings applies the given cluster settings (key → value; an empty value
// restores the default), all or none, and returns every overridden setting.
// With no changes it only lists them.
func (c *Client) Settings(ctx context.Context, set map[string]string) (map[string]string, error) {
	req := &tidekvpb.SettingsRequest{}
	for k, v := range set {
		req.Set = append(req.Set, &tidekvpb.Setting{Key: k, Value: v})
	}
	var resp *tidekvpb.SettingsResponse
	err := c.invoke(ctx, &rpc{op: "settings", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.Settings(ctx, req)
			return err
		}})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, st := range resp.GetSettings() {
		out[st.GetKey()] = st.GetValue()
	}
	return out, nil
}

// ClusterNow is a timestamp from the cluster's clocks, not the client's:
// above every write acknowledged before the call, within the cluster's
// maximum clock offset (a node answers its clock plus the offset, once
// its clock has passed that, which takes up to the offset). A read at it
// (ReadAt) sees all of them: the cut of a backup.
func (c *Client) ClusterNow(ctx context.Context) (hlc.Timestamp, error) {
	var resp *tidekvpb.ClusterTimestampResponse
	err := c.invoke(ctx, &rpc{op: "cluster timestamp", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.ClusterTimestamp(ctx, &tidekvpb.ClusterTimestampRequest{})
			return err
		}})
	if err != nil {
		return hlc.Timestamp{}, err
	}
	ts := resp.GetTimestamp().HLC()
	if ts.IsZero() {
		return ts, fmt.Errorf("%w: cluster timestamp: the node answered none", ErrUnavailable)
	}
	_, _ = c.clock.Update(ts) // what the client does next is ordered after it
	return ts, nil
}

// ProtectTimestamp keeps from MVCC GC, cluster-wide, every version a read
// at the returned timestamp can see, for ttl unless renewed
// (RenewProtection) or released (ReleaseProtection) before: a backup's
// cut. The timestamp is the cluster's now, as ClusterNow. owner says who
// holds it, for operators.
func (c *Client) ProtectTimestamp(ctx context.Context, ttl time.Duration, owner string) (*tidekvpb.ProtectedTimestamp, error) {
	resp, err := c.protect(ctx, &tidekvpb.ProtectTimestampRequest{TtlMs: ttl.Milliseconds(), Owner: owner}, false)
	if err != nil {
		return nil, err
	}
	if resp.GetProtection().GetId() == 0 {
		return nil, fmt.Errorf("%w: protect timestamp: the node answered none", ErrUnavailable)
	}
	_, _ = c.clock.Update(resp.GetProtection().GetTimestamp().HLC())
	return resp.GetProtection(), nil
}

// RenewProtection makes protected timestamp id expire ttl from now. One
// released, or expired and purged, is an error: GC may have passed it.
func (c *Client) RenewProtection(ctx context.Context, id uint64, ttl time.Duration) error {
	_, err := c.protect(ctx, &tidekvpb.ProtectTimestampRequest{Id: id, TtlMs: ttl.Milliseconds()}, true)
	return err
}

// ReleaseProtection removes protected timestamp id (none: no error).
func (c *Client) ReleaseProtection(ctx context.Context, id uint64) error {
	_, err := c.protect(ctx, &tidekvpb.ProtectTimestampRequest{Id: id, Release: true}, true)
	return err
}

// ProtectedTimestamps lists the protected timestamps the cluster holds,
// expired ones not yet purged included.
func (c *Client) ProtectedTimestamps(ctx context.Context) ([]*tidekvpb.ProtectedTimestamp, error) {
	resp, err := c.protect(ctx, &tidekvpb.ProtectTimestampRequest{}, true)
	return resp.GetAll(), err
}

// protect sends one ProtectTimestamp request; a creation is not retried
// after it may have been applied (a copy would pin GC until it expires).
func (c *Client) protect(ctx context.Context, req *tidekvpb.ProtectTimestampRequest, idempotent bool) (*tidekvpb.ProtectTimestampResponse, error) {
	var resp *tidekvpb.ProtectTimestampResponse
	err := c.invoke(ctx, &rpc{op: "protect timestamp", anyNode: true, idempotent: idempotent,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.ProtectTimestamp(ctx, req)
			return err
		}})
	return resp, err
}

// LocalStatus returns the status of the node at addr itself (its replicas,
// their Raft state). It goes to that node only and is not retried elsewhere.
func (c *Client) LocalStatus(ctx context.Context, addr string) (*tidekvpb.LocalStatusResponse, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	nc, err := c.conns.get(addr)
	if err != nil {
		return nil, fmt.Errorf("tidekv: local status: %w", err)
	}
	actx, cancel := c.attemptCtx(ctx)
	defer cancel()
	resp, err := nc.admin.LocalStatus(actx, &tidekvpb.LocalStatusRequest{})
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, ctxError("local status", cerr, err)
		}
		st := status.Convert(err)
		switch classify(st, errorDetail(st)) {
		case classInvalid:
			return nil, fmt.Errorf("%w: local status of %s: %s", ErrInvalidArgument, addr, st.Message())
		case classTransport, classUnavailable:
			return nil, fmt.Errorf("%w: local status of %s: %v", ErrUnavailable, addr, err)
		case classOverloaded:
			return nil, fmt.Errorf("%w: local status of %s: %v", ErrOverloaded, addr, err)
		}
		return nil, fmt.Errorf("tidekv: local status of %s: %w", addr, err)
	}
	return resp, nil
}

// Split splits the range containing key at key. Any node accepts it and
// forwards it to the range's leaseholder. An unknown outcome is resolved
// from the range directory: a range starting at key means the split
// happened; otherwise it is made again (once more without a deadline).
func (c *Client) Split(ctx context.Context, key []byte) (*tidekvpb.SplitResponse, error) {
	var ambiguous error
	for round := 0; ; round++ {
		resp, err := c.splitOnce(ctx, key)
		if err == nil {
			return resp, nil
		}
		if ambiguous == nil && !errors.Is(err, ErrAmbiguous) {
			return nil, err
		}
		// After an ambiguous attempt, a refusal may just say the split is
		// there already: the directory tells.
		if resp, ok := c.splitOutcome(ctx, key, 2*time.Second); ok {
			return resp, nil
		}
		if !errors.Is(err, ErrAmbiguous) {
			return nil, err
		}
		ambiguous = err
		if _, hasDeadline := ctx.Deadline(); ctx.Err() != nil || (!hasDeadline && round >= 1) {
			return nil, ambiguous
		}
	}
}

// splitOutcome polls the range directory for up to wait for a range that
// starts at key, and returns it with its left neighbour.
func (c *Client) splitOutcome(ctx context.Context, key []byte, wait time.Duration) (*tidekvpb.SplitResponse, bool) {
	var out *tidekvpb.SplitResponse
	ok := c.awaitDirectory(ctx, wait, func(resp *tidekvpb.RangesResponse) bool {
		var left *tidekvpb.RangeDescriptor
		for _, ri := range resp.GetRanges() {
			d := ri.GetDesc()
			if bytes.Equal(d.GetStartKey(), key) {
				out = &tidekvpb.SplitResponse{Left: left, Right: d}
				return true
			}
			left = d
		}
		return false
	})
	return out, ok
}

// awaitDirectory polls the range directory every 100 ms, for at most wait,
// until found says it shows what an ambiguous admin call asked for.
func (c *Client) awaitDirectory(ctx context.Context, wait time.Duration, found func(*tidekvpb.RangesResponse) bool) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		if resp, err := c.Ranges(ctx); err == nil && found(resp) {
			return true
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return false
		}
	}
}

func (c *Client) splitOnce(ctx context.Context, key []byte) (*tidekvpb.SplitResponse, error) {
	var resp *tidekvpb.SplitResponse
	err := c.invoke(ctx, &rpc{op: "split", anyNode: true, noAttemptTimeout: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.Split(ctx, &tidekvpb.SplitRequest{SplitKey: key})
			return err
		}})
	if err != nil {
		return nil, err
	}
	// Learn the new boundaries now instead of from the next KEY_MISMATCH.
	for _, d := range []*tidekvpb.RangeDescriptor{resp.GetLeft(), resp.GetRight()} {
		if d != nil {
			c.cache.update(d, 0, "")
		}
	}
	return resp, nil
}

// ChangeReplicas adds a voter on addNodeID and/or removes the replica on
// removeNodeID (0 for none) and returns the new descriptor. An unknown
// outcome (the node running it died, say) is resolved from the range
// directory: if the range has the asked-for layout the change happened,
// otherwise it was rolled back or never ran and is made again (the
// leaseholder resumes a learner left in place). Only when the deadline
// ends first is the answer ErrAmbiguous.
func (c *Client) ChangeReplicas(ctx context.Context, rangeID, addNodeID, removeNodeID uint64) (*tidekvpb.RangeDescriptor, error) {
	var ambiguous error
	for round := 0; ; round++ {
		d, err := c.changeReplicasOnce(ctx, rangeID, addNodeID, removeNodeID)
		switch {
		case err == nil:
			return d, nil
		case ambiguous != nil && errors.Is(err, ErrInvalidArgument):
			// A retry refused as asking for what is already there: the
			// ambiguous attempt did it, and the directory had not heard yet.
			if d, ok := c.changeOutcome(ctx, rangeID, addNodeID, removeNodeID, time.Second); ok {
				return d, nil
			}
			return nil, err
		case !errors.Is(err, ErrAmbiguous):
			return nil, err
		}
		ambiguous = err
		if d, ok := c.changeOutcome(ctx, rangeID, addNodeID, removeNodeID, 2*time.Second); ok {
			return d, nil
		}
		if _, hasDeadline := ctx.Deadline(); ctx.Err() != nil || (!hasDeadline && round >= 2) {
			return nil, ambiguous
		}
	}
}

// changeOutcome polls the range directory for up to wait and reports
// whether rangeID has the layout a change asked for: a voter on add (if
// any) and no replica on remove (if any).
func (c *Client) changeOutcome(ctx context.Context, rangeID, add, remove uint64, wait time.Duration) (*tidekvpb.RangeDescriptor, bool) {
	var out *tidekvpb.RangeDescriptor
	ok := c.awaitDirectory(ctx, wait, func(resp *tidekvpb.RangesResponse) bool {
		for _, ri := range resp.GetRanges() {
			if d := ri.GetDesc(); d.GetRangeId() == rangeID && hasLayout(d, add, remove) {
				out = d
				return true
			}
		}
		return false
	})
	return out, ok
}

func hasLayout(d *tidekvpb.RangeDescriptor, add, remove uint64) bool {
	var added, removed = add == 0, true
	for _, rd := range d.GetReplicas() {
		switch rd.GetNodeId() {
		case add:
			added = rd.GetType() == tidekvpb.ReplicaType_VOTER
		case remove:
			removed = false
		}
	}
	return added && removed
}

func (c *Client) changeReplicasOnce(ctx context.Context, rangeID, addNodeID, removeNodeID uint64) (*tidekvpb.RangeDescriptor, error) {
	req := &tidekvpb.ChangeReplicasRequest{RangeId: rangeID, AddNodeId: addNodeID, RemoveNodeId: removeNodeID}
	return layoutChange(ctx, c, "change replicas", func(ctx context.Context, nc *nodeConn) (*tidekvpb.ChangeReplicasResponse, error) {
		return nc.admin.ChangeReplicas(ctx, req)
	})
}

// layoutChange sends a call that changes a range's layout to any node,
// once per attempt without an attempt timeout, and learns the descriptor
// it answers.
func layoutChange[R interface {
	GetDesc() *tidekvpb.RangeDescriptor
}](ctx context.Context, c *Client, op string, send func(context.Context, *nodeConn) (R, error)) (*tidekvpb.RangeDescriptor, error) {
	var resp R
	err := c.invoke(ctx, &rpc{op: op, anyNode: true, noAttemptTimeout: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = send(ctx, nc)
			return err
		}})
	if err != nil {
		return nil, err
	}
	if d := resp.GetDesc(); d != nil {
		c.cache.update(d, 0, "")
	}
	return resp.GetDesc(), nil
}

// Merge joins range leftRangeID with its right neighbour, which must have
// the same replicas, and returns the merged descriptor. Any node accepts
// it and forwards it to the left range's leaseholder. It is not retried
// after an unknown outcome: a second merge would join the next neighbour
// too; the range directory tells what happened.
func (c *Client) Merge(ctx context.Context, leftRangeID uint64) (*tidekvpb.RangeDescriptor, error) {
	req := &tidekvpb.MergeRequest{LeftRangeId: leftRangeID}
	return layoutChange(ctx, c, "merge", func(ctx context.Context, nc *nodeConn) (*tidekvpb.MergeResponse, error) {
		return nc.admin.Merge(ctx, req)
	})
}

// TransferLease moves the lease of rangeID to targetNodeID. Repeating a
// transfer is harmless, so it is retried like reads.
func (c *Client) TransferLease(ctx context.Context, rangeID, targetNodeID uint64) error {
	req := &tidekvpb.TransferLeaseRequest{RangeId: rangeID, TargetNodeId: targetNodeID}
	err := c.invoke(ctx, &rpc{op: "transfer lease", anyNode: true, idempotent: true, noAttemptTimeout: true,
		call: func(ctx context.Context, nc *nodeConn) error {
			_, err := nc.admin.TransferLease(ctx, req)
			return err
		}})
	if err != nil {
		return err
	}
	// Point requests at the new leaseholder right away.
	for _, e := range c.cache.load().ranges {
		if e.desc.GetRangeId() == rangeID {
			e.leader.Store(targetNodeID)
		}
	}
	return nil
}
