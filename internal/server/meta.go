package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/gossip"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// metaState is what the meta leaseholder keeps in memory besides the
// replicated directory: who leads each range, and when each node last
// heartbeated with which load. A new leaseholder rebuilds it from reports
// and heartbeats within a few seconds.
type metaState struct {
	mu      sync.Mutex
	leaders map[uint64]uint64
	// load is each range's load as its leaseholder last reported it.
	load  map[uint64]rangeLoad
	nodes map[uint64]*nodeLiveness
	// states is each node's state as last announced in an event.
	states map[uint64]string
	// since is when this node last became meta leaseholder; decisions that
	// need liveness wait a grace period after it.
	since time.Time
}

type nodeLiveness struct {
	lastSeen time.Time
	hb       *tidekvpb.NodeHeartbeatRequest
}

func newMetaState() *metaState {
	m := &metaState{}
	m.reset(time.Time{})
	return m
}

// reset forgets everything learnt as leaseholder; a new term rebuilds it.
// Callers hold mu (or own m exclusively).
func (m *metaState) reset(since time.Time) {
	m.since = since
	m.leaders = map[uint64]uint64{}
	m.load = map[uint64]rangeLoad{}
	m.nodes = map[uint64]*nodeLiveness{}
	m.states = map[uint64]string{}
}

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
	resp := &tidekvpb.RangesResponse{Nodes: nodes}
	s.meta.mu.Lock()
	for _, d := range descs {
		if d.GetRangeId() == keys.MetaRangeID {
			continue
		}
		l := s.meta.load[d.GetRangeId()]
		if l.gen != 0 && l.gen < d.GetGeneration() {
			// Reported before the range's last split or merge: its size
			// was the old span's, and placement would split the left half
			// again on it (urgent rounds come as soon as 250 ms apart).
			l.bytes, l.keys, l.garbage, l.stale = 0, 0, 0, true
		}
		resp.Ranges = append(resp.Ranges, &tidekvpb.RangeInfo{Desc: d, LeaderNodeId: s.meta.leaders[d.GetRangeId()],
			Qps: l.qps, ReadQps: l.readQPS, Bytes: l.bytes, HotKeyShare: l.hotKeyShare, LeaseTerm: l.term, LoadStale: l.stale, ChangeInProgress: l.changing,
			GarbageBytes: l.garbage, Keys: l.keys, WritesByOrigin: l.writes})
	}
	s.meta.mu.Unlock()
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
	s.meta.mu.Lock()
	s.meta.nodes[n.GetNodeId()] = &nodeLiveness{lastSeen: time.Now(), hb: req}
	s.meta.mu.Unlock()
	version, err := s.raiseLogVersion(ctx, meta, nodes)
	if err != nil {
		return nil, err
	}
	return &tidekvpb.NodeHeartbeatResponse{Nodes: nodes, MigrationBytesPerSec: s.ctl.loop.Runner.MigrationRate(), LogVersion: version,
		GcTtlMs: s.clusterConfig().GC.TTL.Milliseconds()}, nil
}

func (s *Server) reportRangeLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.ReportRangeRequest) (*tidekvpb.ReportRangeResponse, error) {
	d := req.GetDesc()
	limit := s.clusterConfig().Placement.SplitBytes()
	s.meta.mu.Lock()
	// A report from an older lease (sent by the previous leaseholder just
	// before it lost the lease) must not replace the new one's numbers.
	if prev, ok := s.meta.load[d.GetRangeId()]; !ok || req.GetLeaseTerm() >= prev.term || req.GetLeaseTerm() == 0 {
		// A range newly above its split line (grown, or a split half
		// still above it) should not wait for the next round to split.
		if req.GetBytes() > limit && (!ok || prev.bytes <= limit || prev.gen != d.GetGeneration()) {
			s.wakePlace()
		}
		s.meta.leaders[d.GetRangeId()] = req.GetLeaderNodeId()
		s.meta.load[d.GetRangeId()] = rangeLoad{qps: req.GetQps(), readQPS: req.GetReadQps(), bytes: req.GetBytes(), gen: d.GetGeneration(),
			hotKeyShare: req.GetHotKeyShare(), term: req.GetLeaseTerm(), stale: req.GetLoadStale(), changing: req.GetChangeInProgress(),
			garbage: req.GetGarbageBytes(), keys: req.GetKeys(), writes: req.GetWritesByOrigin()}
	}
	s.meta.mu.Unlock()
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

// Node states as shown to operators (and mapped to placement's).
const (
	stateLive    = "live"
	stateSuspect = "suspect" // heartbeats late: not live, not yet given up on
	stateUnknown = "unknown" // no heartbeat yet since this node became meta leaseholder
	stateDead    = "dead"    // silent beyond DeadNodeGrace: its replicas are replaced
	// Decommissioning: replicas moving away; drained once it holds none;
	// decommissioned once it also stopped.
	stateDraining       = "draining"
	stateDrained        = "drained"
	stateDecommissioned = "decommissioned"
)

// nodeStatuses combines the node records with what their heartbeats said
// and the controller's bootstrap phases.
func (s *Server) nodeStatuses(nodes []*tidekvpb.NodeDescriptor, now time.Time) []*tidekvpb.NodeStatus {
	s.meta.mu.Lock()
	since := s.meta.since
	out := make([]*tidekvpb.NodeStatus, 0, len(nodes))
	for _, n := range nodes {
		ns := &tidekvpb.NodeStatus{Node: n, LastSeenSeconds: -1}
		silent := now.Sub(since) // never heard from: silent since we took over
		if l := s.meta.nodes[n.GetNodeId()]; l != nil {
			silent = now.Sub(l.lastSeen)
			ns.LastSeenSeconds = silent.Seconds()
			hb := l.hb
			ns.Replicas, ns.Leases, ns.Bytes, ns.Qps = hb.GetReplicas(), hb.GetLeases(), hb.GetBytes(), hb.GetQps()
			ns.Cpu, ns.Score, ns.P99Ms, ns.CpuQuota = hb.GetCpu(), hb.GetScore(), hb.GetP99Ms(), hb.GetCpuQuota()
			ns.QueueDelayMs, ns.AdmitShare, ns.Overloaded, ns.RejectedQps = hb.GetQueueDelayMs(), hb.GetAdmitShare(), hb.GetOverloaded(), hb.GetRejectedQps()
			ns.ClockUntrusted, ns.ClockReason, ns.MaxClockOffsetMs = hb.GetClockUntrusted(), hb.GetClockReason(), hb.GetMaxClockOffsetMs()
			ns.Live = silent < s.cfg.LivenessTimeout
		}
		ns.State = s.stateOf(n, ns, silent)
		out = append(out, ns)
	}
	s.meta.mu.Unlock()
	for _, ns := range out {
		if ns.GetState() == stateLive {
			if p := s.phaseOf(ns.GetNode().GetNodeId()); p != placement.PhaseNone {
				ns.State = p.String()
			}
		}
	}
	return out
}

// stateOf names a node's state from how long it has been silent and, with
// gossip on, from what gossip says: unreachable by gossip for the grace
// period is dead even if an old heartbeat is recent; unreachable at all is
// at least suspect.
func (s *Server) stateOf(n *tidekvpb.NodeDescriptor, ns *tidekvpb.NodeStatus, silent time.Duration) string {
	heard := ns.GetLastSeenSeconds() >= 0
	gs, gsince, gok := s.gossipState(n.GetNodeId())
	gossipDown := gok && (gs == gossip.Dead || gs == gossip.Left)
	switch {
	case gossipDown && time.Since(gsince) >= s.cfg.Control.DeadNodeGrace && !(n.GetDraining() && ns.GetReplicas() == 0):
		return stateDead
	case gok && gs != gossip.Alive && ns.GetLive():
		return stateSuspect
	case !heard && (!gok || gs == gossip.Alive) && silent < 2*s.cfg.Control.DeadNodeGrace && !gossipDown:
		// Not heard from yet, but not known to be gone either: a node
		// that joined after this leaseholder took over, about to
		// heartbeat. (One silent past twice the grace is given up on.)
		return stateUnknown
	case n.GetDraining() && ns.GetReplicas() == 0 && heard && !ns.GetLive():
		return stateDecommissioned
	case silent >= s.cfg.Control.DeadNodeGrace:
		return stateDead
	case !heard:
		// Never heard from, and gossip cannot reach it (the cases above
		// took every other node not heard from).
		return stateSuspect
	case !ns.GetLive():
		return stateSuspect
	case n.GetDraining() && ns.GetReplicas() == 0:
		return stateDrained
	case n.GetDraining():
		return stateDraining
	}
	return stateLive
}

// liveNodes returns the nodes that heartbeated recently, or nil during the
// grace period after this node became meta leaseholder (liveness unknown).
func (s *Server) liveNodes() map[uint64]bool {
	s.meta.mu.Lock()
	defer s.meta.mu.Unlock()
	if time.Since(s.meta.since) < 3*s.cfg.HeartbeatInterval {
		return nil
	}
	live := map[uint64]bool{}
	for id, l := range s.meta.nodes {
		if time.Since(l.lastSeen) < s.cfg.LivenessTimeout {
			live[id] = true
		}
	}
	return live
}
