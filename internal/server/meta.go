package server

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/meta"
	"github.com/tidekv/tidekv/internal/metarange"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/settings"
	"github.com/tidekv/tidekv/internal/storage"
)

// metaLeader returns the local meta replica if it holds the lease.
func (s *Server) metaLeader() *raftstore.Replica { return s.peers.route.MetaLeader() }

// routeNode is the node as its admin routing sees it.
type routeNode struct{ s *Server }

func (n routeNode) Replica(id uint64) *raftstore.Replica {
	if n.s.store == nil {
		return nil
	}
	return n.s.store.GetReplica(id)
}

func (n routeNode) Self() string                           { return n.s.Addr() }
func (n routeNode) ID() uint64                             { return n.s.id.node }
func (n routeNode) Addr(id uint64) (string, bool)          { return n.s.peers.dir.Addr(id) }
func (n routeNode) Status(err error) error                 { return n.s.toStatus(err) }
func (n routeNode) Detail(err error) *tidekvpb.ErrorDetail { return errorDetail(err) }

func (n routeNode) Members() []string {
	var out []string
	for _, d := range n.s.peers.dir.List() {
		out = append(out, d.GetGrpcAddr())
	}
	return out
}

func (n routeNode) Directory(ctx context.Context) (*tidekvpb.RangesResponse, error) {
	return n.s.ranges(ctx)
}

// ranges returns the range directory from the meta leaseholder.
func (s *Server) ranges(ctx context.Context) (*tidekvpb.RangesResponse, error) {
	return adminroute.Meta(ctx, s.peers.route, s.metaRange().Ranges, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.RangesResponse, error) {
		return c.Ranges(ctx, &tidekvpb.RangesRequest{})
	})
}

// onMeta runs a meta range call with req: on this node's meta replica
// (local, internal/metarange) if it holds the lease, else at the node that
// does (remote; adminroute.Meta finds it).
func onMeta[Req, Resp any](ctx context.Context, s *Server, req Req, local func(metarange.Handlers, context.Context, *raftstore.Replica, Req) (Resp, error),
	remote func(tidekvpb.AdminClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	return adminroute.Meta(ctx, s.peers.route, func(ctx context.Context, meta *raftstore.Replica) (Resp, error) {
		return local(s.metaRange(), ctx, meta, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (Resp, error) {
		return remote(c, ctx, req)
	})
}

// metaRange answers the meta range's admin calls (internal/metarange).
func (s *Server) metaRange() metarange.Handlers { return metarange.Handlers{Node: metaNode{s}} }

// metaNode is the node as the meta range's handlers see it.
type metaNode struct{ s *Server }

func (n metaNode) ClusterID() uint64           { return n.s.id.cluster }
func (n metaNode) ID() uint64                  { return n.s.id.node }
func (n metaNode) Engine() storage.Reader      { return n.s.ks.Engine() }
func (n metaNode) Table() *meta.Table          { return n.s.meta.table }
func (n metaNode) GCTTL() time.Duration        { return n.s.clusterConfig().GC.TTL }
func (n metaNode) SplitBytes() uint64          { return n.s.clusterConfig().Placement.SplitBytes() }
func (n metaNode) MigrationRate() float64      { return n.s.meta.ctl.MigrationRate() }
func (n metaNode) WakePlace()                  { n.s.meta.ctl.Wake() }
func (n metaNode) BaseConfig() settings.Config { return n.s.baseConfig() }

// SettingsChanged: Θmax may have changed, and the write budgets here
// follow at once.
func (n metaNode) SettingsChanged()                    { n.s.sizes.Poke() }
func (n metaNode) LogVersion() uint32                  { return n.s.store.LogVersion() }
func (n metaNode) SetCatalogue(cat ksconfig.Catalogue) { n.s.ks.Set(cat) }
func (n metaNode) Statuses(nodes []*tidekvpb.NodeDescriptor, now time.Time) []*tidekvpb.NodeStatus {
	return n.s.nodeStatuses(nodes, now)
}
func (n metaNode) Record(kind, subject, format string, args ...any) {
	n.s.events.Record(kind, subject, format, args...)
}

// nodeStatuses combines the node records with what their heartbeats said
// (meta.Table.Statuses) and the controller's bootstrap phases.
func (s *Server) nodeStatuses(nodes []*tidekvpb.NodeDescriptor, now time.Time) []*tidekvpb.NodeStatus {
	out := s.meta.table.Statuses(nodes, now, meta.Liveness{Timeout: s.cfg.LivenessTimeout, DeadGrace: s.cfg.Control.DeadNodeGrace}, s.gossipState)
	for _, ns := range out {
		if ns.GetState() == meta.StateLive {
			if p := s.meta.ctl.Phase(ns.GetNode().GetNodeId()); p != placement.PhaseNone {
				ns.State = p.String()
			}
		}
	}
	return out
}

// liveNodes returns the nodes that heartbeated recently, or nil during the
// grace period after this node became meta leaseholder (liveness unknown).
func (s *Server) liveNodes() map[uint64]bool {
	return s.meta.table.LiveNodes(time.Now(), 3*s.cfg.HeartbeatInterval, s.cfg.LivenessTimeout)
}
