package server

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/keys"
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
	if !a.s.ready.Load() {
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
	resp, err := callMeta(ctx, s, s.statusLocal, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.StatusResponse, error) {
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
			if n, err := s.eng.ApproximateSize(r.DataSpan()); err == nil {
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
	s := a.s
	key, rangeID := req.GetSplitKey(), req.GetRangeId()
	switch {
	case len(key) > 0:
		if err := s.checkKey(key); err != nil {
			return nil, err
		}
		if rangeID == 0 {
			var err error
			if rangeID, err = s.rangeIDForKey(ctx, key); err != nil {
				return nil, s.toStatus(err)
			}
		}
	case rangeID == 0:
		return nil, invalidArg("split: give a split key or a range ID")
	}
	resp, err := callRangeLeader(ctx, s, rangeID, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.SplitResponse, error) {
		if want, gen := req.GetExpectedGeneration(), r.Desc().GetGeneration(); want != 0 && want != gen {
			return nil, status.Errorf(codes.Aborted, "range %d changed since the split was decided (generation %d, now %d): nothing done", rangeID, want, gen)
		}
		splitKeys := [][]byte{key}
		if len(key) == 0 {
			var err error
			if splitKeys, err = s.splitKeysFor(ctx, r, req.GetByLoad()); err != nil {
				return nil, err
			}
		}
		// From the right, so that every split cuts the range r still leads.
		var resp *tidekvpb.SplitResponse
		for i := len(splitKeys) - 1; i >= 0; i-- {
			var err error
			if resp, err = s.splitAt(ctx, r, splitKeys[i], req.GetReason()); err != nil {
				return nil, err
			}
		}
		return resp, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.SplitResponse, error) {
		return c.Split(ctx, req)
	})
	return resp, s.toStatus(err)
}

// splitAt splits the range the leaseholder r leads at key.
func (s *Server) splitAt(ctx context.Context, r *raftstore.Replica, key []byte, reason string) (*tidekvpb.SplitResponse, error) {
	d := r.Desc()
	if bytes.Equal(d.GetStartKey(), key) {
		return nil, invalidArg("key %q is already the start of range %d", key, d.GetRangeId())
	}
	if !keys.Contains(d.GetStartKey(), d.GetEndKey(), key) {
		return nil, &raftstore.KeyMismatchError{Key: key, Desc: d}
	}
	newID, err := s.allocRangeID(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := r.Split(ctx, key, newID)
	if err == nil {
		s.events.Record("split", rangeSubject(d.GetRangeId()), "split at %s into ranges %d and %d: %s",
			cliformat.Quote(key), d.GetRangeId(), newID, reasonOr(reason))
	}
	return resp, err
}

// splitKeysFor picks where the leaseholder r splits its range: the median
// of its sampled requests, or by size the key that halves its data, or the
// keys that cut it into pieces no larger than its split line if halves
// would still be above it (raftstore.SizeSplitKeys).
func (s *Server) splitKeysFor(ctx context.Context, r *raftstore.Replica, byLoad bool) ([][]byte, error) {
	if !byLoad {
		return r.SizeSplitKeys(ctx, s.clusterConfig().Placement.SplitBytes())
	}
	key, hot, ok := r.LoadSplitKey()
	if !ok {
		return nil, fmt.Errorf("%w: range %d: no load split key (too few sampled requests, or %.0f%% on one key)", raftstore.ErrInvalidRequest, r.RangeID(), 100*hot)
	}
	return [][]byte{key}, nil
}

// rangeIDForKey finds the range covering key, locally or in the directory.
func (s *Server) rangeIDForKey(ctx context.Context, key []byte) (uint64, error) {
	if r := s.store.LookupKey(key); r != nil {
		return r.RangeID(), nil
	}
	resp, err := s.ranges(ctx)
	if err != nil {
		return 0, err
	}
	for _, ri := range resp.GetRanges() {
		d := ri.GetDesc()
		if d.GetRangeId() != keys.MetaRangeID && keys.Contains(d.GetStartKey(), d.GetEndKey(), key) {
			return d.GetRangeId(), nil
		}
	}
	return 0, &raftstore.RangeNotFoundError{Key: key}
}

func (a *adminService) ChangeReplicas(ctx context.Context, req *tidekvpb.ChangeReplicasRequest) (*tidekvpb.ChangeReplicasResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	if req.GetAddNodeId() == 0 && req.GetRemoveNodeId() == 0 {
		return nil, invalidArg("change replicas: name a node to add or to remove")
	}
	if id := req.GetAddNodeId(); id != 0 {
		if _, ok := s.dir.Get(id); !ok {
			return nil, invalidArg("node %d is not a member of the cluster", id)
		}
	}
	resp, err := callRangeLeader(ctx, s, req.GetRangeId(), func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.ChangeReplicasResponse, error) {
		var d *tidekvpb.RangeDescriptor
		var err error
		if req.GetLearner() {
			if req.GetRemoveNodeId() != 0 {
				return nil, invalidArg("change replicas: a learner is added on its own, not with a removal")
			}
			d, err = r.AddLearner(ctx, req.GetAddNodeId())
		} else {
			s.ks.Learn(ctx, r.Desc().GetStartKey()) // its replication factor
			d, err = r.ChangeReplicas(ctx, req.GetAddNodeId(), req.GetRemoveNodeId())
		}
		if err != nil {
			return nil, err
		}
		s.recordReplicaChange(req)
		return &tidekvpb.ChangeReplicasResponse{Desc: d}, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ChangeReplicasResponse, error) {
		return c.ChangeReplicas(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (a *adminService) TransferLease(ctx context.Context, req *tidekvpb.TransferLeaseRequest) (*tidekvpb.TransferLeaseResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := callRangeLeader(ctx, s, req.GetRangeId(), func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.TransferLeaseResponse, error) {
		if s.nodeID == req.GetTargetNodeId() {
			return &tidekvpb.TransferLeaseResponse{}, nil
		}
		if s.clockUntrustedOn(req.GetTargetNodeId()) {
			return nil, status.Errorf(codes.FailedPrecondition, "node %d: %v", req.GetTargetNodeId(), errClockUntrusted)
		}
		if err := r.TransferLease(req.GetTargetNodeId()); err != nil {
			return nil, err
		}
		s.events.Record("lease-transfer", rangeSubject(req.GetRangeId()), "lease moving from node %d to node %d: %s",
			s.nodeID, req.GetTargetNodeId(), reasonOr(req.GetReason()))
		return &tidekvpb.TransferLeaseResponse{}, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.TransferLeaseResponse, error) {
		return c.TransferLease(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (a *adminService) Join(ctx context.Context, req *tidekvpb.JoinRequest) (*tidekvpb.JoinResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := callMeta(ctx, s, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.JoinResponse, error) {
		return s.joinLocal(ctx, r, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.JoinResponse, error) {
		return c.Join(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (a *adminService) NodeHeartbeat(ctx context.Context, req *tidekvpb.NodeHeartbeatRequest) (*tidekvpb.NodeHeartbeatResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := callMeta(ctx, s, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.NodeHeartbeatResponse, error) {
		return s.heartbeatLocal(ctx, r, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.NodeHeartbeatResponse, error) {
		return c.NodeHeartbeat(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (a *adminService) ReportRange(ctx context.Context, req *tidekvpb.ReportRangeRequest) (*tidekvpb.ReportRangeResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := callMeta(ctx, s, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.ReportRangeResponse, error) {
		return s.reportRangeLocal(ctx, r, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ReportRangeResponse, error) {
		return c.ReportRange(ctx, req)
	})
	return resp, s.toStatus(err)
}

// reasonOr names the reason an admin call gave, or says an operator asked.
func reasonOr(reason string) string {
	if reason == "" {
		return "requested by an operator"
	}
	return reason
}

func (s *Server) recordReplicaChange(req *tidekvpb.ChangeReplicasRequest) {
	subject, reason := rangeSubject(req.GetRangeId()), reasonOr(req.GetReason())
	switch add, rm := req.GetAddNodeId(), req.GetRemoveNodeId(); {
	case add != 0 && rm != 0:
		s.events.Record("replica-move", subject, "replica moved from node %d to node %d: %s", rm, add, reason)
	case add != 0 && req.GetLearner():
		s.events.Record("learner-add", subject, "read replica (learner) added on node %d: %s", add, reason)
	case add != 0:
		s.events.Record("replica-add", subject, "replica added on node %d: %s", add, reason)
	default:
		s.events.Record("replica-remove", subject, "replica removed from node %d: %s", rm, reason)
	}
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

func sortRanges(rs []*tidekvpb.RangeInfo) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i].GetDesc(), rs[j].GetDesc()
		if (a.GetRangeId() == keys.MetaRangeID) != (b.GetRangeId() == keys.MetaRangeID) {
			return a.GetRangeId() == keys.MetaRangeID
		}
		return bytes.Compare(a.GetStartKey(), b.GetStartKey()) < 0
	})
}

func (s *Server) allocRangeID(ctx context.Context) (uint64, error) {
	return callMeta(ctx, s, func(ctx context.Context, meta *raftstore.Replica) (uint64, error) {
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
