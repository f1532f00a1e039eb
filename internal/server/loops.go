package server

import (
	"context"
	"log"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/loops"
	"github.com/tidekv/tidekv/internal/metarange"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/raftstore"
)

func (s *Server) startLoops() {
	s.bg.Every(s.cfg.HeartbeatInterval, s.report.Heartbeat)
	s.bg.Every(s.cfg.ReportInterval, s.report.ReportAll)
	s.bg.Every(s.cfg.ReportInterval, s.migrateLayouts)
	// Ticks as often as the shortest GC interval; a Pebble range's pass
	// keeps the time its own interval gives it.
	s.bg.EveryWithin(s.cfg.GC.Tick(), loops.RunTimeout(s.cfg.GC.Interval), s.gc.Round)
	s.bg.Every(s.cfg.Cache.EvictInterval, s.ks.EvictRound)
	s.placeLoop()
	s.sizeLoop()
	s.bg.Every(s.cfg.ReplicaGCInterval, s.gcReplicas)
	s.bg.Go(s.gcAtStart)
	s.bg.Every(s.cfg.HeartbeatInterval, s.watchLiveness)
	s.bg.Every(s.cfg.ClosedTimestampInterval, s.peers.push.Round)
	s.bg.Every(s.cfg.ClosedTimestampInterval, func(context.Context) { s.clock.Check(time.Now()) })
	s.bg.Every(metrics.SeriesInterval, func(context.Context) { s.metrics.Sample(time.Now()) })
	s.bg.Every(s.cfg.Monitor.SampleInterval, func(context.Context) { s.report.Monitor().Sample() })
	// Admission windows move on even when no request arrives.
	sched := admission.NewSchedSampler()
	s.bg.Every(s.cfg.Admission.Interval, func(context.Context) { s.adm.Tick(sched.Sample()) })
	s.bg.Go(func() { s.report.Send(s.bg.Stopped()) })
}

// migrateLayouts moves the data of every user range this node leads to
// the versioned layout once the cluster runs at log version 4, one range
// at a time: each is one Raft entry whose apply rewrites up to Θmax of
// data (raftstore/migrate.go).
func (s *Server) migrateLayouts(ctx context.Context) {
	if s.store.LogVersion() < raftstore.LogVersionMVCC {
		return
	}
	for _, r := range s.store.Replicas() {
		if ctx.Err() != nil {
			return
		}
		if r.IsLeader() && r.RangeID() != keys.MetaRangeID && r.Desc() != nil && !r.VersionedLayout() {
			if err := r.MigrateLayout(ctx); err != nil {
				log.Printf("range %d: moving to the versioned layout: %v", r.RangeID(), err)
			}
		}
	}
}

// gcReplicas removes local replicas that the range directory says are no
// longer members (they missed their own removal, e.g. while down).
func (s *Server) gcReplicas(ctx context.Context) {
	_ = s.gcReplicasOnce(ctx)
}

func (s *Server) gcReplicasOnce(ctx context.Context) error {
	descs, err := metaDirectory{s}.RangeDescriptors(ctx)
	if err != nil {
		return err
	}
	for _, rm := range s.store.RemoveStale(descs) {
		s.ReplicaRemoved(rm)
	}
	return nil
}

// gcAtStart checks the node's replicas against the directory as soon as
// the meta range answers after a (re)start, rather than a GC interval
// later: replicas moved away while the node was down go at once.
func (s *Server) gcAtStart() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := s.gcReplicasOnce(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-s.bg.Stopped():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// metaDirectory is the range directory the store checks replicas against:
// the meta range, read through its leaseholder.
type metaDirectory struct{ s *Server }

func (m metaDirectory) RangeDescriptors(ctx context.Context) ([]*tidekvpb.RangeDescriptor, error) {
	resp, err := m.s.ranges(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*tidekvpb.RangeDescriptor, 0, len(resp.GetRanges()))
	for _, ri := range resp.GetRanges() {
		out = append(out, ri.GetDesc())
	}
	return out, nil
}

// reportNode is the node as its heartbeats and range reports see it.
type reportNode struct{ s *Server }

func (n reportNode) Self() *tidekvpb.NodeDescriptor       { return n.s.self() }
func (n reportNode) ID() uint64                           { return n.s.id.node }
func (n reportNode) Replicas() []*raftstore.Replica       { return n.s.store.Replicas() }
func (n reportNode) Replica(id uint64) *raftstore.Replica { return n.s.store.GetReplica(id) }
func (n reportNode) Bytes() uint64                        { return n.s.localStatus().GetBytes() }
func (n reportNode) ClockUntrusted() bool                 { return n.s.store.ClockUntrusted() != "" }
func (n reportNode) Garbage(id uint64) uint64             { return n.s.gc.Garbage(id) }

func (n reportNode) Heartbeat(ctx context.Context, req *tidekvpb.NodeHeartbeatRequest) (*tidekvpb.NodeHeartbeatResponse, error) {
	return onMeta(ctx, n.s, req, metarange.Handlers.Heartbeat, tidekvpb.AdminClient.NodeHeartbeat)
}

func (n reportNode) ReportRange(ctx context.Context, req *tidekvpb.ReportRangeRequest) (*tidekvpb.ReportRangeResponse, error) {
	return onMeta(ctx, n.s, req, metarange.Handlers.ReportRange, tidekvpb.AdminClient.ReportRange)
}

// Heard takes in the meta range's answer: the node directory, the
// migration allowance, the gc-ttl and the cluster's log version.
func (n reportNode) Heard(resp *tidekvpb.NodeHeartbeatResponse) error {
	s := n.s
	s.peers.dir.Update(resp.GetNodes())
	s.store.SetSnapshotRate(s.cfg.snapshotRate(resp.GetMigrationBytesPerSec()))
	s.gc.LearnTTL(resp.GetGcTtlMs())
	err := s.store.RaiseLogVersion(resp.GetLogVersion())
	s.rejoinGossip()
	return err
}

func (n reportNode) Record(kind, subject, format string, args ...any) {
	n.s.events.Record(kind, subject, format, args...)
}
