package server

import (
	"context"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/metarange"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// adminService serves cluster administration. Any node accepts any call and
// forwards it to where it runs: the meta leaseholder for directory calls,
// the range's leaseholder for range changes.
type adminService struct {
	tidekvpb.UnimplementedAdminServer
	s *Server
}

func (a *adminService) ready() error {
	if !a.s.ports.ready.Load() {
		return a.s.toStatus(raftstore.ErrStopped)
	}
	return nil
}

func (a *adminService) Ranges(ctx context.Context, req *tidekvpb.RangesRequest) (*tidekvpb.RangesResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := a.s.ranges(ctx)
	return resp, a.s.toStatus(err)
}

func (a *adminService) Status(ctx context.Context, req *tidekvpb.StatusRequest) (*tidekvpb.StatusResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := adminroute.Meta(ctx, s.peers.route, s.metaRange().Status, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.StatusResponse, error) {
		return c.Status(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (a *adminService) LocalStatus(ctx context.Context, req *tidekvpb.LocalStatusRequest) (*tidekvpb.LocalStatusResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	return a.s.localStatus(), nil
}

// ClusterTimestamp answers a timestamp above every write acknowledged
// before the call, within the maximum clock offset: such a write's
// timestamp is at most the clock of the node that acknowledged it (commit
// wait), which is at most this node's clock now plus the offset. The
// answer waits until this node's clock has passed it, so that a read at
// it is not in the future here.
func (a *adminService) ClusterTimestamp(ctx context.Context, req *tidekvpb.ClusterTimestampRequest) (*tidekvpb.ClusterTimestampResponse, error) {
	clock := a.s.store.HLC()
	ts := clock.Now()
	ts.WallTime += int64(clock.MaxOffset())
	a.s.store.CommitWait(ctx, ts)
	if err := ctx.Err(); err != nil {
		return nil, a.s.toStatus(err)
	}
	return &tidekvpb.ClusterTimestampResponse{Timestamp: tidekvpb.FromHLC(ts)}, nil
}

func (s *Server) localStatus() *tidekvpb.LocalStatusResponse {
	resp := &tidekvpb.LocalStatusResponse{Node: s.self(), Qps: s.metrics.Latest().QPS}
	for _, r := range s.store.Replicas() {
		st := r.Status()
		rs := &tidekvpb.ReplicaStatus{RangeId: st.RangeID, ReplicaId: st.ReplicaID, Leader: st.Leader, Term: st.Term,
			CommitIndex: st.Commit, AppliedIndex: st.Applied}
		if d := st.Desc; d != nil {
			rs.StartKey, rs.EndKey, rs.Generation = d.GetStartKey(), d.GetEndKey(), d.GetGeneration()
			for _, rd := range d.GetReplicas() {
				if rd.GetReplicaId() == st.ReplicaID {
					rs.Type = rd.GetType()
				}
			}
			if n, err := s.ks.Engine().ApproximateSize(r.DataSpan()); err == nil {
				resp.Bytes += n
			}
		}
		resp.Replicas = append(resp.Replicas, rs)
	}
	return resp
}

func (a *adminService) Split(ctx context.Context, req *tidekvpb.SplitRequest) (*tidekvpb.SplitResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := a.s.rangeOps().Split(ctx, req)
	return resp, a.s.toStatus(err)
}

func (a *adminService) ChangeReplicas(ctx context.Context, req *tidekvpb.ChangeReplicasRequest) (*tidekvpb.ChangeReplicasResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := a.s.rangeOps().ChangeReplicas(ctx, req)
	return resp, a.s.toStatus(err)
}

func (a *adminService) TransferLease(ctx context.Context, req *tidekvpb.TransferLeaseRequest) (*tidekvpb.TransferLeaseResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := a.s.rangeOps().TransferLease(ctx, req)
	return resp, a.s.toStatus(err)
}

func (a *adminService) Join(ctx context.Context, req *tidekvpb.JoinRequest) (*tidekvpb.JoinResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := onMeta(ctx, s, req, metarange.Handlers.Join, tidekvpb.AdminClient.Join)
	return resp, s.toStatus(err)
}

func (a *adminService) NodeHeartbeat(ctx context.Context, req *tidekvpb.NodeHeartbeatRequest) (*tidekvpb.NodeHeartbeatResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := reportNode{a.s}.Heartbeat(ctx, req)
	return resp, a.s.toStatus(err)
}

func (a *adminService) ReportRange(ctx context.Context, req *tidekvpb.ReportRangeRequest) (*tidekvpb.ReportRangeResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := reportNode{a.s}.ReportRange(ctx, req)
	return resp, a.s.toStatus(err)
}

// Events returns this node's events, or every node's merged.
func (a *adminService) Events(ctx context.Context, req *tidekvpb.EventsRequest) (*tidekvpb.EventsResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	if req.GetLocal() {
		return &tidekvpb.EventsResponse{Events: a.s.events.List(int(req.GetLimit()))}, nil
	}
	return &tidekvpb.EventsResponse{Events: a.s.clusterEvents(ctx, int(req.GetLimit()))}, nil
}

func (s *Server) allocRangeID(ctx context.Context) (uint64, error) {
	return adminroute.Meta(ctx, s.peers.route, func(ctx context.Context, meta *raftstore.Replica) (uint64, error) {
		return meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{AllocRangeId: true})
	}, func(ctx context.Context, c tidekvpb.AdminClient) (uint64, error) {
		resp, err := c.AllocRangeID(ctx, &tidekvpb.AllocRangeIDRequest{})
		return resp.GetRangeId(), err
	})
}

func (a *adminService) AllocRangeID(ctx context.Context, req *tidekvpb.AllocRangeIDRequest) (*tidekvpb.AllocRangeIDResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	id, err := a.s.allocRangeID(ctx)
	if err != nil {
		return nil, a.s.toStatus(err)
	}
	return &tidekvpb.AllocRangeIDResponse{RangeId: id}, nil
}

// Readiness answers whether the cluster is ready (metarange.Handlers.Readiness)
// on the meta leaseholder; other nodes forward.
func (a *adminService) Readiness(ctx context.Context, req *tidekvpb.ReadinessRequest) (*tidekvpb.ReadinessResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := adminroute.Meta(ctx, s.peers.route, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.ReadinessResponse, error) {
		return s.metaRange().Readiness(ctx, meta, s.cfg.Placement.ReplicationFactor)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ReadinessResponse, error) {
		return c.Readiness(ctx, req)
	})
	return resp, s.toStatus(err)
}

// Decommission marks a node draining, or no longer draining
// (metarange.Handlers.Decommission), on the meta leaseholder; other nodes
// forward.
func (a *adminService) Decommission(ctx context.Context, req *tidekvpb.DecommissionRequest) (*tidekvpb.DecommissionResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := onMeta(ctx, s, req, metarange.Handlers.Decommission, tidekvpb.AdminClient.Decommission)
	return resp, s.toStatus(err)
}
