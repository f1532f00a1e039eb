package gcqueue

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// protectMaxTTL bounds one grant of a protection: an abandoned one pins GC
// at most this long.
const protectMaxTTL = 24 * time.Hour

// ProtectTimestamp creates, renews, releases or lists protected
// timestamps (ProtectTimestampRequest), on the meta leaseholder.
func (q *Queue) ProtectTimestamp(ctx context.Context, req *tidekvpb.ProtectTimestampRequest) (*tidekvpb.ProtectTimestampResponse, error) {
	return adminroute.Meta(ctx, q.route, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.ProtectTimestampResponse, error) {
		return q.protectLocal(ctx, meta, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ProtectTimestampResponse, error) {
		return c.ProtectTimestamp(ctx, req)
	})
}

func (q *Queue) protectLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.ProtectTimestampRequest) (*tidekvpb.ProtectTimestampResponse, error) {
	n := q.node
	ttl := time.Duration(req.GetTtlMs()) * time.Millisecond
	changes := req.GetRelease() || ttl != 0
	if v := n.LogVersion(); changes && v < raftstore.LogVersionProtectedTS {
		return nil, fmt.Errorf("%w: protected timestamps need Raft log version %d on every node, the cluster is at %d", raftstore.ErrLogVersion, raftstore.LogVersionProtectedTS, v)
	}
	if ttl < 0 || ttl > protectMaxTTL || (req.GetRelease() && req.GetId() == 0) {
		return nil, kverr.Invalid("protect timestamp: a ttl between 0 and %s, and an id to release, not ttl %s, id %d", protectMaxTTL, ttl, req.GetId())
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	resp := &tidekvpb.ProtectTimestampResponse{}
	clock := n.Clock()
	expires := time.Now().Add(ttl).UnixMilli()
	switch {
	case req.GetRelease():
		if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{ReleaseProtectedTimestamp: req.GetId()}); err != nil {
			return nil, err
		}
		n.Record("protected-ts", "cluster", "protected timestamp %d released", req.GetId())
	case ttl > 0 && req.GetId() != 0:
		p := &tidekvpb.ProtectedTimestamp{Id: req.GetId(), ExpiresAtMs: expires}
		id, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{ProtectTimestamp: p})
		if err != nil {
			return nil, err
		}
		if id == 0 {
			return nil, status.Errorf(codes.NotFound, "protected timestamp %d is gone (released, or expired and purged): GC may have passed its timestamp", req.GetId())
		}
	case ttl > 0:
		// The timestamp is the cluster's now (as ClusterTimestamp), and the
		// record must be committed before this clock passes it: gcSafePoint
		// relies on that for a GC round that read the records just before
		// this one was added.
		ts := clock.Now()
		ts.WallTime += int64(clock.MaxOffset())
		p := &tidekvpb.ProtectedTimestamp{Timestamp: tidekvpb.FromHLC(ts), ExpiresAtMs: expires, Owner: req.GetOwner()}
		id, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{ProtectTimestamp: p})
		if err != nil {
			return nil, err
		}
		if now := clock.Now(); ts.Less(now) {
			_, _ = meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{ReleaseProtectedTimestamp: id})
			return nil, status.Errorf(codes.Unavailable, "protected timestamp not recorded in time: the meta range took %s, more than the maximum clock offset %s; try again",
				time.Duration(now.WallTime-ts.WallTime)+clock.MaxOffset(), clock.MaxOffset())
		}
		n.CommitWait(ctx, ts) // a read at it is not in the future here
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.Id = id
		resp.Protection = p
		n.Record("protected-ts", "cluster", "protected timestamp %d at %s for %s, by %s", id, ts, ttl, req.GetOwner())
		q.purgeExpired(ctx, meta)
	}
	all, err := n.Protected()
	if err != nil {
		return nil, err
	}
	resp.All = all
	for _, p := range all {
		if p.GetId() == req.GetId() && !req.GetRelease() && ttl > 0 {
			resp.Protection = p
		}
	}
	return resp, nil
}

// purgeExpired removes the records GC already ignores; a failure leaves
// them for the next creation.
func (q *Queue) purgeExpired(ctx context.Context, meta *raftstore.Replica) {
	all, err := q.node.Protected()
	if err != nil {
		return
	}
	for _, p := range all {
		if protectionExpired(p, q.node.Clock().Now(), q.node.Clock().MaxOffset()) {
			if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{ReleaseProtectedTimestamp: p.GetId()}); err != nil {
				return
			}
			q.node.Record("protected-ts", "cluster", "protected timestamp %d at %s, by %s, expired and purged", p.GetId(), p.GetTimestamp().HLC(), p.GetOwner())
		}
	}
}

// protectionExpired: p's expiry, set by another node's clock, has passed
// by this one's even if that clock was the maximum offset behind.
func protectionExpired(p *tidekvpb.ProtectedTimestamp, now hlc.Timestamp, maxOffset time.Duration) bool {
	return time.Duration(now.WallTime) > time.Duration(p.GetExpiresAtMs())*time.Millisecond+maxOffset
}

// gcSafePoint is where a GC round may collect a range of retention ttl:
// ttl (at least twice the maximum clock offset) before this node's clock
// as it was just before the round read the protected timestamps, and no
// higher than any of them that has not expired. held names the protection
// that lowered it ("": none).
//
// A protection added after that read is safe too: it was committed before
// its creator's clock passed its timestamp (protectLocal), so its
// timestamp is above this node's clock at the read less the maximum
// offset, and above this node's HLC then less twice the offset (the HLC
// may run up to the offset ahead of the slowest clock).
func gcSafePoint(readAt hlc.Timestamp, ttl, maxOffset time.Duration, protections []*tidekvpb.ProtectedTimestamp) (safePoint hlc.Timestamp, held string) {
	safePoint = hlc.Timestamp{WallTime: readAt.WallTime - max(ttl, 2*maxOffset).Nanoseconds()}
	for _, p := range protections {
		if ts := p.GetTimestamp().HLC(); !protectionExpired(p, readAt, maxOffset) && ts.Less(safePoint) {
			safePoint, held = ts, fmt.Sprintf("protected timestamp %d by %s", p.GetId(), p.GetOwner())
		}
	}
	return safePoint, held
}

// protections are the protected timestamps as one GC round read them,
// read once, when the round first needs them.
type protections struct {
	readAt hlc.Timestamp
	all    []*tidekvpb.ProtectedTimestamp
	err    error
	done   bool
}

func (q *Queue) protections(ctx context.Context, g *protections) error {
	if g.done {
		return g.err
	}
	g.done, g.readAt = true, q.node.Clock().Now()
	if q.node.LogVersion() < raftstore.LogVersionProtectedTS {
		return nil // none can exist, and an older meta leaseholder has no RPC for them
	}
	resp, err := q.ProtectTimestamp(ctx, &tidekvpb.ProtectTimestampRequest{})
	g.all, g.err = resp.GetAll(), err
	return err
}
