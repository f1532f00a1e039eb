package server

import (
	"context"
	"fmt"
	"log"
	"sort"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/raftstore"
)

func (s *Server) startLoops() {
	s.loop(s.cfg.HeartbeatInterval, s.heartbeat)
	s.loop(s.cfg.ReportInterval, s.reportAll)
	s.loop(s.cfg.ReplicateInterval, s.replicateOnce)
	s.loop(s.cfg.ReplicaGCInterval, s.gcReplicas)
	s.loop(s.cfg.HeartbeatInterval, s.watchLiveness)
	s.loop(s.cfg.ClosedTimestampInterval, s.pushClosed)
	s.loop(s.cfg.LeaseRebalanceInterval, s.followWriters)
	s.loop(seriesInterval, func(context.Context) { s.metrics.sample(time.Now()) })
	s.loop(s.cfg.Monitor.SampleInterval, func(context.Context) { s.mon.Sample() })
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.stopper:
				return
			case d := <-s.reports:
				s.report(d)
			}
		}
	}()
}

// loop runs fn every interval until the server stops.
func (s *Server) loop(every time.Duration, fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stopper:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 4*every+2*time.Second)
				go func() {
					select {
					case <-s.stopper:
						cancel()
					case <-ctx.Done():
					}
				}()
				fn(ctx)
				cancel()
			}
		}
	}()
}

func (s *Server) heartbeat(ctx context.Context) {
	p := s.metrics.latest()
	req := &tidekvpb.NodeHeartbeatRequest{Node: s.self(), Qps: p.QPS, P99Ms: p.P99Ms}
	if snap := s.mon.Latest(); snap != nil {
		req.Cpu, req.Score = snap.Usage.CPU, snap.Score
	}
	for _, r := range s.store.Replicas() {
		req.Replicas++
		if r.IsLeader() {
			req.Leases++
		}
	}
	req.Bytes = s.localStatus().GetBytes()
	resp, err := callMeta(ctx, s, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.NodeHeartbeatResponse, error) {
		return s.heartbeatLocal(ctx, r, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.NodeHeartbeatResponse, error) {
		return c.NodeHeartbeat(ctx, req)
	})
	if err != nil {
		return
	}
	s.dir.update(resp.GetNodes())
}

func (s *Server) report(d *tidekvpb.RangeDescriptor) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := s.rangeLoadOf(d.GetRangeId())
	req := &tidekvpb.ReportRangeRequest{Desc: d, LeaderNodeId: s.nodeID, Qps: l.qps, Bytes: l.bytes}
	_, err := callMeta(ctx, s, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.ReportRangeResponse, error) {
		return s.reportRangeLocal(ctx, r, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ReportRangeResponse, error) {
		return c.ReportRange(ctx, req)
	})
	if err != nil {
		log.Printf("range %d: report to meta range: %v", d.GetRangeId(), err)
	}
}

// reportAll re-reports every range this node leads, so the directory heals
// from lost reports and a new meta leaseholder learns the leaders.
func (s *Server) reportAll(ctx context.Context) {
	s.sampleRangeLoad(time.Now())
	for _, r := range s.store.Replicas() {
		if r.IsLeader() && r.Desc() != nil {
			s.queueReport(r.Desc())
		}
	}
}

// replicateOnce, on the meta leaseholder, brings ranges with fewer voters
// than the replication factor up to it, one change at a time, onto the live
// node with the fewest replicas. It also finishes half-done additions
// (leftover learners). Full placement (balance, repair of dead nodes) is
// the placement controller's job.
func (s *Server) replicateOnce(ctx context.Context) {
	if s.metaLeader() == nil {
		return
	}
	live := s.liveNodes()
	if live == nil {
		return
	}
	resp, err := s.ranges(ctx)
	if err != nil {
		return
	}
	meta := s.store.GetReplica(keys.MetaRangeID)
	descs := []*tidekvpb.RangeDescriptor{meta.Desc()}
	for _, ri := range resp.GetRanges() {
		descs = append(descs, ri.GetDesc())
	}
	counts := map[uint64]int{}
	for id := range live {
		counts[id] = 0
	}
	for _, d := range descs {
		for _, rd := range d.GetReplicas() {
			counts[rd.GetNodeId()]++
		}
	}
	rf := s.cfg.Raft.ReplicationFactor
	for _, d := range descs {
		voters, target := 0, uint64(0)
		has := map[uint64]bool{}
		for _, rd := range d.GetReplicas() {
			has[rd.GetNodeId()] = true
			switch rd.GetType() {
			case tidekvpb.ReplicaType_VOTER:
				voters++
			case tidekvpb.ReplicaType_LEARNER:
				if live[rd.GetNodeId()] && target == 0 {
					target = rd.GetNodeId() // finish an interrupted addition
				}
			}
		}
		if voters >= rf {
			continue
		}
		if target == 0 {
			var cands []uint64
			for id := range live {
				if !has[id] {
					cands = append(cands, id)
				}
			}
			if len(cands) == 0 {
				continue
			}
			sort.Slice(cands, func(i, j int) bool {
				if counts[cands[i]] != counts[cands[j]] {
					return counts[cands[i]] < counts[cands[j]]
				}
				return cands[i] < cands[j]
			})
			target = cands[0]
		}
		reason := fmt.Sprintf("up-replication: %d of %d voters, node %d has the fewest replicas", voters, rf, target)
		log.Printf("range %d: %s", d.GetRangeId(), reason)
		req := &tidekvpb.ChangeReplicasRequest{RangeId: d.GetRangeId(), AddNodeId: target, Reason: reason}
		cctx, cancel := context.WithTimeout(context.Background(), s.cfg.Raft.CatchUpTimeout+5*time.Second)
		_, err := callRangeLeader(cctx, s, d.GetRangeId(), func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.ChangeReplicasResponse, error) {
			nd, err := r.ChangeReplicas(ctx, target, 0)
			if err == nil {
				s.recordReplicaChange(req)
			}
			return &tidekvpb.ChangeReplicasResponse{Desc: nd}, err
		}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ChangeReplicasResponse, error) {
			return c.ChangeReplicas(ctx, req)
		})
		cancel()
		if err != nil {
			log.Printf("range %d: adding replica on node %d: %v", d.GetRangeId(), target, err)
			s.events.Record("replica-add-failed", rangeSubject(d.GetRangeId()), "adding a replica on node %d failed: %v", target, err)
		}
		return // one change per round keeps the load on new nodes gentle
	}
}

// gcReplicas removes local replicas that the range directory says are no
// longer members (they missed their own removal, e.g. while down).
func (s *Server) gcReplicas(ctx context.Context) {
	resp, err := s.ranges(ctx)
	if err != nil {
		return
	}
	byID := map[uint64]*tidekvpb.RangeDescriptor{}
	for _, ri := range resp.GetRanges() {
		byID[ri.GetDesc().GetRangeId()] = ri.GetDesc()
	}
	for _, r := range s.store.Replicas() {
		d := byID[r.RangeID()]
		if d == nil || r.Desc() == nil || r.IsLeader() {
			continue
		}
		if s.store.RemoveIfStale(d) {
			s.events.Record("replica-gc", rangeSubject(r.RangeID()), "local replica removed: the range directory no longer lists this node (generation %d)", d.GetGeneration())
		}
	}
}
