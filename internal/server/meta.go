package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/meta"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
)

const forwardedKey = "tidekv-forwarded"

func isForwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedKey)) > 0
}

func forwarded(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardedKey, "1")
}

// local strips the forwarded mark: it applies to the hop that received it,
// not to the calls that hop makes while serving the request.
func local(ctx context.Context) context.Context {
	return metadata.NewIncomingContext(ctx, metadata.MD{})
}

// metaLeader returns the local meta replica if it holds the lease.
func (s *Server) metaLeader() *raftstore.Replica {
	if s.store == nil {
		return nil
	}
	r := s.store.GetReplica(keys.MetaRangeID)
	if r == nil || !r.IsLeader() {
		return nil
	}
	return r
}

// callMeta runs an operation on the meta range's leaseholder: locally when
// this node holds it, otherwise on the node that does, found by following
// NOT_LEASEHOLDER hints from any node we know.
func callMeta[T any](ctx context.Context, s *Server, localFn func(context.Context, *raftstore.Replica) (T, error), remote func(context.Context, tidekvpb.AdminClient) (T, error)) (T, error) {
	var zero T
	if r := s.metaLeader(); r != nil {
		return localFn(local(ctx), r)
	}
	if isForwarded(ctx) {
		// Forwarded here by a node that thought we lead: let it follow the hint.
		if r := s.store.GetReplica(keys.MetaRangeID); r != nil {
			return zero, s.toStatus(&raftstore.NotLeaderError{RangeID: keys.MetaRangeID, LeaderNodeID: r.LeaderNodeID()})
		}
		return zero, s.toStatus(&raftstore.NotLeaderError{RangeID: keys.MetaRangeID})
	}
	var lastErr error = errors.New("meta leaseholder not found")
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		for _, addr := range s.metaCandidates() {
			if addr == s.Addr() {
				if r := s.metaLeader(); r != nil {
					return localFn(local(ctx), r)
				}
				continue
			}
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			v, err := remote(forwarded(actx), tidekvpb.NewAdminClient(s.conn(addr)))
			cancel()
			if err == nil {
				s.metaLeaderAddr.Store(&addr)
				return v, nil
			}
			lastErr = err
			if d := errorDetail(err); d != nil && d.GetKind() == tidekvpb.ErrorKind_NOT_LEASEHOLDER {
				if d.GetLeaderAddr() != "" {
					a := d.GetLeaderAddr()
					s.metaLeaderAddr.Store(&a)
				}
				continue
			}
			if d := errorDetail(err); d != nil && d.GetKind() != tidekvpb.ErrorKind_UNAVAILABLE {
				return zero, err // a real answer from the leaseholder
			}
		}
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("meta range: %w (last error: %v)", ctx.Err(), lastErr)
		case <-s.stopper:
			return zero, raftstore.ErrStopped
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// metaCandidates lists addresses to try for the meta leaseholder, most
// likely first.
func (s *Server) metaCandidates() []string {
	var out []string
	seen := map[string]bool{}
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if p := s.metaLeaderAddr.Load(); p != nil {
		add(*p)
	}
	if r := s.store.GetReplica(keys.MetaRangeID); r != nil {
		if a, ok := s.dir.Addr(r.LeaderNodeID()); ok {
			add(a)
		}
		for _, rd := range r.Desc().GetReplicas() {
			if a, ok := s.dir.Addr(rd.GetNodeId()); ok {
				add(a)
			}
		}
	}
	for _, n := range s.dir.List() {
		add(n.GetGrpcAddr())
	}
	for _, a := range s.cfg.Join {
		add(a)
	}
	return out
}

// callRangeLeader runs an admin operation on a range's leaseholder, locally
// or by forwarding, following hints.
func callRangeLeader[T any](ctx context.Context, s *Server, rangeID uint64, localFn func(context.Context, *raftstore.Replica) (T, error), remote func(context.Context, tidekvpb.AdminClient) (T, error)) (T, error) {
	var zero T
	var lastErr error = fmt.Errorf("leaseholder of range %d not found", rangeID)
	backoff := 20 * time.Millisecond
	var hint []string
	for {
		if r := s.store.GetReplica(rangeID); r != nil && r.IsLeader() {
			v, err := localFn(local(ctx), r)
			var nl *raftstore.NotLeaderError
			if !errors.As(err, &nl) || nl.RangeID != rangeID {
				return v, err
			}
			lastErr = err
		} else if isForwarded(ctx) {
			if r != nil {
				return zero, s.toStatus(&raftstore.NotLeaderError{RangeID: rangeID, LeaderNodeID: r.LeaderNodeID(), Desc: r.Desc()})
			}
			return zero, s.toStatus(&raftstore.RangeNotFoundError{RangeID: rangeID})
		} else if addrs := append(hint, s.rangeCandidates(ctx, rangeID)...); len(addrs) > 0 {
			hint = nil
			// The most likely leaseholder first; a wrong guess costs one
			// round and its hint updates the next round's candidates.
			actx, cancel := context.WithTimeout(ctx, 70*time.Second)
			v, err := remote(forwarded(actx), tidekvpb.NewAdminClient(s.conn(addrs[0])))
			cancel()
			if err == nil {
				return v, nil
			}
			lastErr = err
			d := errorDetail(err)
			if d == nil || (d.GetKind() != tidekvpb.ErrorKind_NOT_LEASEHOLDER && d.GetKind() != tidekvpb.ErrorKind_RANGE_NOT_FOUND && d.GetKind() != tidekvpb.ErrorKind_UNAVAILABLE) {
				return zero, err
			}
			if a := d.GetLeaderAddr(); a != "" && a != s.Addr() {
				hint = []string{a}
			}
		}
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("range %d: %w (last error: %v)", rangeID, ctx.Err(), lastErr)
		case <-s.stopper:
			return zero, raftstore.ErrStopped
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// rangeCandidates lists addresses likely to hold a range's lease.
func (s *Server) rangeCandidates(ctx context.Context, rangeID uint64) []string {
	var out []string
	seen := map[string]bool{}
	add := func(node uint64) {
		if a, ok := s.dir.Addr(node); ok && !seen[a] && node != s.nodeID {
			seen[a] = true
			out = append(out, a)
		}
	}
	if r := s.store.GetReplica(rangeID); r != nil {
		add(r.LeaderNodeID())
	}
	if resp, err := s.ranges(ctx); err == nil {
		for _, ri := range resp.GetRanges() {
			if ri.GetDesc().GetRangeId() == rangeID {
				add(ri.GetLeaderNodeId())
				for _, rd := range ri.GetDesc().GetReplicas() {
					add(rd.GetNodeId())
				}
			}
		}
	}
	return out
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
	s.events.Record("node-join", nodeSubject(id), "joined the cluster from %s", req.GetGrpcAddr())
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
