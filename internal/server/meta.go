package server

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/meta"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// metaLeader returns the local meta replica if it holds the lease.
func (s *Server) metaLeader() *raftstore.Replica { return s.route.MetaLeader() }

// callMeta runs an operation on the meta range's leaseholder, here or
// forwarded (internal/adminroute).
func callMeta[T any](ctx context.Context, s *Server, localFn func(context.Context, *raftstore.Replica) (T, error), remote func(context.Context, tidekvpb.AdminClient) (T, error)) (T, error) {
	return adminroute.Meta(ctx, s.route, localFn, remote)
}

// callRangeLeader runs an admin operation on a range's leaseholder, here
// or forwarded (internal/adminroute).
func callRangeLeader[T any](ctx context.Context, s *Server, rangeID uint64, localFn func(context.Context, *raftstore.Replica) (T, error), remote func(context.Context, tidekvpb.AdminClient) (T, error)) (T, error) {
	return adminroute.Range(ctx, s.route, rangeID, localFn, remote)
}

// routeNode is the node as its admin routing sees it.
type routeNode struct{ s *Server }

func (n routeNode) Replica(id uint64) *raftstore.Replica {
	if n.s.store == nil {
		return nil
	}
	return n.s.store.GetReplica(id)
}

func (n routeNode) Self() string                           { return n.s.Addr() }
func (n routeNode) ID() uint64                             { return n.s.nodeID }
func (n routeNode) Addr(id uint64) (string, bool)          { return n.s.dir.Addr(id) }
func (n routeNode) Status(err error) error                 { return n.s.toStatus(err) }
func (n routeNode) Detail(err error) *tidekvpb.ErrorDetail { return errorDetail(err) }

func (n routeNode) Members() []string {
	var out []string
	for _, d := range n.s.dir.List() {
		out = append(out, d.GetGrpcAddr())
	}
	return out
}

func (n routeNode) Directory(ctx context.Context) (*tidekvpb.RangesResponse, error) {
	return n.s.ranges(ctx)
}

// ranges returns the range directory from the meta leaseholder.
func (s *Server) ranges(ctx context.Context) (*tidekvpb.RangesResponse, error) {
	return callMeta(ctx, s, s.rangesLocal, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.RangesResponse, error) {
		return c.Ranges(ctx, &tidekvpb.RangesRequest{})
	})
}

func (s *Server) rangesLocal(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.RangesResponse, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	descs, err := raftstore.ReadMetaRanges(s.eng)
	if err != nil {
		return nil, err
	}
	nodes, err := raftstore.ReadMetaNodes(s.eng)
	if err != nil {
		return nil, err
	}
	resp := &tidekvpb.RangesResponse{Nodes: nodes, Ranges: s.meta.RangeInfos(descs)}
	sortRanges(resp.Ranges)
	return resp, nil
}

func (s *Server) joinLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.JoinRequest) (*tidekvpb.JoinResponse, error) {
	if req.GetGrpcAddr() == "" {
		return nil, invalidArg("join: grpc_addr is required")
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	active, err := s.checkJoinVersion(req)
	if err != nil {
		return nil, err
	}
	id, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{AddNode: &tidekvpb.NodeDescriptor{GrpcAddr: req.GetGrpcAddr(), HttpAddr: req.GetHttpAddr(), MaxLogVersion: req.GetMaxLogVersion()}})
	if err != nil {
		return nil, err
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	nodes, err := raftstore.ReadMetaNodes(s.eng)
	if err != nil {
		return nil, err
	}
	s.events.Record("node-join", events.NodeSubject(id), "joined the cluster from %s", req.GetGrpcAddr())
	return &tidekvpb.JoinResponse{ClusterId: s.clusterID, NodeId: id, Nodes: nodes, LogVersion: active}, nil
}

func (s *Server) heartbeatLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.NodeHeartbeatRequest) (*tidekvpb.NodeHeartbeatResponse, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	nodes, err := raftstore.ReadMetaNodes(s.eng)
	if err != nil {
		return nil, err
	}
	n := proto.Clone(req.GetNode()).(*tidekvpb.NodeDescriptor)
	for i, o := range nodes {
		if o.GetNodeId() != n.GetNodeId() {
			continue
		}
		// Draining is the cluster's decision about the node, not the
		// node's to report.
		n.Draining = o.GetDraining()
		if !proto.Equal(o, n) {
			// The node moved to new addresses or labels (restarted
			// elsewhere or reconfigured).
			if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{UpdateNode: n}); err != nil {
				return nil, err
			}
			nodes[i] = n
		}
	}
	s.meta.Heartbeat(time.Now(), req)
	version, err := s.raiseLogVersion(ctx, meta, nodes)
	if err != nil {
		return nil, err
	}
	return &tidekvpb.NodeHeartbeatResponse{Nodes: nodes, MigrationBytesPerSec: s.ctl.loop.Runner.MigrationRate(), LogVersion: version,
		GcTtlMs: s.clusterConfig().GC.TTL.Milliseconds()}, nil
}

func (s *Server) reportRangeLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.ReportRangeRequest) (*tidekvpb.ReportRangeResponse, error) {
	d := req.GetDesc()
	if s.meta.Report(req, s.clusterConfig().Placement.SplitBytes()) {
		s.wakePlace()
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	if !s.directoryNeeds(d) {
		return &tidekvpb.ReportRangeResponse{}, nil
	}
	if _, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{UpdateRange: d}); err != nil {
		return nil, err
	}
	return &tidekvpb.ReportRangeResponse{}, nil
}

// directoryNeeds reports whether d may change the range directory: it is
// newer than what is stored for its range. The apply decides the rest
// (raftstore.DirectoryUpdate), on the whole directory; this check reads one
// key because every leaseholder re-reports every few seconds.
func (s *Server) directoryNeeds(d *tidekvpb.RangeDescriptor) bool {
	v, ok, err := s.eng.Get(keys.DataKey(keys.MetaRangeID, keys.MetaRangeKey(d.GetRangeId())))
	if err != nil || !ok {
		return true
	}
	stored := &tidekvpb.RangeDescriptor{}
	return proto.Unmarshal(v, stored) != nil || stored.GetGeneration() < d.GetGeneration()
}

func (s *Server) statusLocal(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.StatusResponse, error) {
	rs, err := s.rangesLocal(ctx, meta)
	if err != nil {
		return nil, err
	}
	resp := &tidekvpb.StatusResponse{ClusterId: s.clusterID, NodeId: s.nodeID, RangeCount: uint32(len(rs.GetRanges()))}
	resp.Nodes = s.nodeStatuses(rs.GetNodes(), time.Now())
	resp.Imbalance = placement.ImbalanceOf(resp.Nodes)
	if resp.LogVersion, err = raftstore.ReadMetaLogVersion(s.eng); err != nil {
		return nil, err
	}
	return resp, nil
}

// nodeStatuses combines the node records with what their heartbeats said
// (meta.Table.Statuses) and the controller's bootstrap phases.
func (s *Server) nodeStatuses(nodes []*tidekvpb.NodeDescriptor, now time.Time) []*tidekvpb.NodeStatus {
	out := s.meta.Statuses(nodes, now, meta.Liveness{Timeout: s.cfg.LivenessTimeout, DeadGrace: s.cfg.Control.DeadNodeGrace}, s.gossipState)
	for _, ns := range out {
		if ns.GetState() == meta.StateLive {
			if p := s.phaseOf(ns.GetNode().GetNodeId()); p != placement.PhaseNone {
				ns.State = p.String()
			}
		}
	}
	return out
}

// liveNodes returns the nodes that heartbeated recently, or nil during the
// grace period after this node became meta leaseholder (liveness unknown).
func (s *Server) liveNodes() map[uint64]bool {
	return s.meta.LiveNodes(time.Now(), 3*s.cfg.HeartbeatInterval, s.cfg.LivenessTimeout)
}
