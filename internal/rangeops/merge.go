package rangeops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Merges are coordinated by the left range's leaseholder: freeze the right
// neighbour (on its leaseholder), wait until every replica of it applied
// the freeze, then propose the merge on the left range (raftstore/merge.go
// explains why this order keeps every replica's data complete). A refused
// merge unfreezes the neighbour; an interrupted one leaves it frozen, and
// placement runs the merge again.

// mergeFreezeWait bounds how long the coordinator waits for every replica of
// the right range to apply the freeze before giving up and unfreezing.
const mergeFreezeWait = 10 * time.Second

// Merge merges a range with its right neighbour.
func (o Ops) Merge(ctx context.Context, req *tidekvpb.MergeRequest) (*tidekvpb.MergeResponse, error) {
	return adminroute.Range(ctx, o.Route, req.GetLeftRangeId(), func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.MergeResponse, error) {
		d, err := o.mergeLocal(ctx, r, req.GetReason())
		if err != nil {
			return nil, err
		}
		return &tidekvpb.MergeResponse{Desc: d}, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.MergeResponse, error) {
		return c.Merge(ctx, req)
	})
}

// FreezeRange freezes (or unfreezes) a range on its leaseholder.
func (o Ops) FreezeRange(ctx context.Context, req *tidekvpb.FreezeRangeRequest) (*tidekvpb.RangeDescriptor, error) {
	resp, err := adminroute.Range(ctx, o.Route, req.GetRangeId(), func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.FreezeRangeResponse, error) {
		var d *tidekvpb.RangeDescriptor
		var err error
		if req.GetUnfreeze() {
			d, err = r.Unfreeze(ctx)
		} else {
			d, err = r.Freeze(ctx, req.GetInto())
		}
		return &tidekvpb.FreezeRangeResponse{Desc: d}, err
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.FreezeRangeResponse, error) {
		return c.FreezeRange(ctx, req)
	})
	return resp.GetDesc(), err
}

// mergeLocal runs a merge of lhs's range with its right neighbour; lhs
// holds the lease.
func (o Ops) mergeLocal(ctx context.Context, lhs *raftstore.Replica, reason string) (*tidekvpb.RangeDescriptor, error) {
	d := lhs.Desc()
	if len(d.GetEndKey()) == 0 {
		return nil, kverr.Invalid("range %d is the last range: it has no right neighbour", d.GetRangeId())
	}
	rs, err := o.Node.Directory(ctx)
	if err != nil {
		return nil, err
	}
	var rhs *tidekvpb.RangeDescriptor
	for _, ri := range rs.GetRanges() {
		if bytes.Equal(ri.GetDesc().GetStartKey(), d.GetEndKey()) {
			rhs = ri.GetDesc()
		}
	}
	switch {
	case rhs == nil:
		return nil, fmt.Errorf("the right neighbour of range %d is not in the range directory yet", d.GetRangeId())
	case rhs.GetMergingInto() != 0 && rhs.GetMergingInto() != d.GetRangeId():
		return nil, kverr.Invalid("range %d is being merged into range %d", rhs.GetRangeId(), rhs.GetMergingInto())
	}
	unfreeze := func() {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := o.FreezeRange(uctx, &tidekvpb.FreezeRangeRequest{RangeId: rhs.GetRangeId(), Unfreeze: true}); err != nil {
			o.Node.Record("merge-failed", events.RangeSubject(rhs.GetRangeId()), "could not unfreeze after a failed merge (placement retries): %v", err)
		}
	}
	frozen, err := o.FreezeRange(ctx, &tidekvpb.FreezeRangeRequest{RangeId: rhs.GetRangeId(), Into: d.GetRangeId()})
	if err != nil {
		return nil, err
	}
	if err := o.WaitFrozen(ctx, frozen); err != nil {
		unfreeze() // nothing proposed on the left range yet: safe
		return nil, err
	}
	for {
		nd, err := lhs.Merge(ctx, frozen)
		cur := lhs.Desc()
		merged := bytes.Equal(cur.GetEndKey(), frozen.GetEndKey())
		switch {
		case err == nil || merged: // done (possibly by an earlier attempt)
			if nd == nil {
				nd = cur
			}
			o.Node.Record("merge", events.RangeSubject(d.GetRangeId()), "merged range %d into range %d, now [%s, %s): %s",
				rhs.GetRangeId(), d.GetRangeId(), printable(nd.GetStartKey()), printable(nd.GetEndKey()), reasonOr(reason))
			return nd, nil
		case errors.Is(err, raftstore.ErrInvalidRequest):
			// Refused by every replica alike: the freeze can go.
			unfreeze()
			return nil, err
		case ctx.Err() != nil || !lhs.IsLeader():
			// Unknown whether it applied: leave the neighbour frozen;
			// the next placement round runs the merge again.
			return nil, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitFrozen waits until every replica of the frozen range has applied the
// freeze: its generation is the frozen one. A frozen range takes no split
// or replica change, so a later generation is an unfreeze (another
// coordinator of the same merge gave up) or the merge itself: taking it
// as frozen proposed a merge of an unfrozen range, which every replica of
// the left range refuses by exiting (TestWaitFrozenRefusesAnUnfrozenRange).
func (o Ops) WaitFrozen(ctx context.Context, frozen *tidekvpb.RangeDescriptor) error {
	ctx, cancel := context.WithTimeout(ctx, mergeFreezeWait)
	defer cancel()
	for {
		pending := 0
		for _, rd := range frozen.GetReplicas() {
			if !o.atGeneration(ctx, rd.GetNodeId(), frozen.GetRangeId(), frozen.GetGeneration()) {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("range %d: %d replicas did not apply the merge freeze in time: %w", frozen.GetRangeId(), pending, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// atGeneration reports whether node's replica of rangeID is at generation
// gen.
func (o Ops) atGeneration(ctx context.Context, node, rangeID, gen uint64) bool {
	if node == o.Node.ID() {
		r := o.Node.Replica(rangeID)
		return r != nil && r.Desc().GetGeneration() == gen
	}
	addr, ok := o.Node.Addr(node)
	if !ok {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := tidekvpb.NewAdminClient(o.Route.Conn(addr)).LocalStatus(cctx, &tidekvpb.LocalStatusRequest{})
	if err != nil {
		return false
	}
	for _, rs := range st.GetReplicas() {
		if rs.GetRangeId() == rangeID {
			return rs.GetGeneration() == gen
		}
	}
	return false
}

func printable(k []byte) string {
	if len(k) == 0 {
		return "-"
	}
	return fmt.Sprintf("%q", k)
}
