package server

import (
	"context"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/queue"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// The MVCC GC queue and protected timestamps live in internal/gcqueue;
// here: the admin RPC and the node as the queue sees it.

// ProtectTimestamp creates, renews, releases or lists protected
// timestamps (ProtectTimestampRequest).
func (a *adminService) ProtectTimestamp(ctx context.Context, req *tidekvpb.ProtectTimestampRequest) (*tidekvpb.ProtectTimestampResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := a.s.gc.ProtectTimestamp(ctx, req)
	return resp, a.s.toStatus(err)
}

// gcNode is the node as its GC queue sees it.
type gcNode struct{ s *Server }

func (n gcNode) LogVersion() uint32                               { return n.s.store.LogVersion() }
func (n gcNode) Replicas() []*raftstore.Replica                   { return n.s.store.Replicas() }
func (n gcNode) Now() time.Time                                   { return n.s.store.Now() }
func (n gcNode) Clock() *hlc.Clock                                { return n.s.store.HLC() }
func (n gcNode) CommitWait(ctx context.Context, ts hlc.Timestamp) { n.s.store.CommitWait(ctx, ts) }
func (n gcNode) SweepIntents(ctx context.Context, r *raftstore.Replica) {
	n.s.sweepIntents(ctx, r)
}
func (n gcNode) Protected() ([]*tidekvpb.ProtectedTimestamp, error) {
	return raftstore.ReadMetaProtected(n.s.ks.Engine())
}
func (n gcNode) Record(kind, subject, format string, args ...any) {
	n.s.events.Record(kind, subject, format, args...)
}

// Policy is the policy of a range starting at start, by its key space as
// this node's catalogue knows it; a key space the node has not learnt yet
// gets the cluster's gc-ttl, which keeps at least a memory default's
// history.
func (n gcNode) Policy(start []byte, cfg queue.GCConfig) queue.GCPolicy {
	k, _ := n.s.ks.Catalogue().ByID(keyspace.Of(start))
	return queue.GCPolicyFor(k, cfg, n.s.cfg.Txn.MaxDuration)
}
