package server

import (
	"context"
	"log"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/clockwatch"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/raftstore"
)

func (s *Server) startLoops() {
	s.loop(s.cfg.HeartbeatInterval, s.heartbeat)
	s.loop(s.cfg.ReportInterval, s.reportAll)
	s.loop(s.cfg.ReportInterval, s.migrateLayouts)
	// Ticks as often as the shortest GC interval; a Pebble range's pass
	// keeps the time its own interval gives it.
	s.loopWithin(s.cfg.GC.Tick(), runTimeout(s.cfg.GC.Interval), s.gc.Round)
	s.loop(s.cfg.Cache.EvictInterval, s.ks.EvictRound)
	s.placeLoop()
	s.sizeLoop()
	s.loop(s.cfg.ReplicaGCInterval, s.gcReplicas)
	s.wg.Go(s.gcAtStart)
	s.loop(s.cfg.HeartbeatInterval, s.watchLiveness)
	s.loop(s.cfg.ClosedTimestampInterval, s.push.Round)
	s.loop(s.cfg.ClosedTimestampInterval, func(context.Context) { s.clock.Check(time.Now()) })
	s.loop(metrics.SeriesInterval, func(context.Context) { s.metrics.Sample(time.Now()) })
	s.loop(s.cfg.Monitor.SampleInterval, func(context.Context) { s.mon.Sample() })
	// Admission windows move on even when no request arrives.
	sched := admission.NewSchedSampler()
	s.loop(s.cfg.Admission.Interval, func(context.Context) { s.adm.Tick(sched.Sample()) })
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

// loop runs fn every interval until the server stops, each run bounded
// as runBounded bounds it.
func (s *Server) loop(every time.Duration, fn func(ctx context.Context)) {
	s.loopWithin(every, runTimeout(every), fn)
}

// loopWithin runs fn every interval until the server stops, each run
// with a context that ends when the server stops or after timeout.
func (s *Server) loopWithin(every, timeout time.Duration, fn func(ctx context.Context)) {
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
				ctx, cancel := s.untilStop(timeout)
				fn(ctx)
				cancel()
			}
		}
	}()
}

// runTimeout is four of a run's intervals plus slack for slow RPCs.
func runTimeout(every time.Duration) time.Duration { return 4*every + 2*time.Second }

// runBounded runs fn once, with a context that ends when the server stops
// or after runTimeout(every).
func (s *Server) runBounded(every time.Duration, fn func(ctx context.Context)) {
	ctx, cancel := s.untilStop(runTimeout(every))
	defer cancel()
	fn(ctx)
}

// untilStop returns a context that ends after timeout or when the server
// stops, whichever comes first.
func (s *Server) untilStop(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	go func() {
		select {
		case <-s.stopper:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (s *Server) heartbeat(ctx context.Context) {
	p := s.metrics.Latest()
	adm := s.adm.State()
	req := &tidekvpb.NodeHeartbeatRequest{Node: s.self(), Qps: p.QPS, P99Ms: p.P99Ms,
		RejectedQps:  s.hbRates.rejectedRate(adm.RejectedTotal(), time.Now()),
		QueueUtil:    float64(adm.Inflight) / float64(s.cfg.Admission.MaxInflight),
		QueueDelayMs: ms(max(adm.QueueDelay, 0)), AdmitShare: adm.AdmitShare, Overloaded: adm.Overloaded}
	if snap := s.mon.Latest(); snap != nil {
		req.Cpu, req.Score, req.CpuQuota = snap.Usage.NodeCPU(), snap.Score, snap.Usage.Quota.CPUs
	}
	ch := s.clock.Health()
	req.ClockUntrusted, req.ClockReason, req.MaxClockOffsetMs = !ch.Trusted, ch.Reason, clockwatch.MaxOffsetMs(ch)
	var qps, reads float64
	for _, r := range s.store.Replicas() {
		req.Replicas++
		if r.IsLeader() {
			req.Leases++
			if d := r.Desc(); d != nil {
				l := s.rangeLoadOf(d, r.LeaderTerm())
				qps, reads = qps+l.QPS, reads+l.ReadQPS
			}
		}
	}
	if qps > 0 {
		req.ReadShare = reads / qps
	}
	req.ReplicaReads = s.replicaReads()
	req.Bytes = s.localStatus().GetBytes()
	req.KeyspaceCounts = s.ks.Counts()
	resp, err := callMeta(ctx, s, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.NodeHeartbeatResponse, error) {
		return s.metaRange().Heartbeat(ctx, r, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.NodeHeartbeatResponse, error) {
		return c.NodeHeartbeat(ctx, req)
	})
	if err != nil {
		return
	}
	s.dir.Update(resp.GetNodes())
	s.store.SetSnapshotRate(s.cfg.snapshotRate(resp.GetMigrationBytesPerSec()))
	s.gc.LearnTTL(resp.GetGcTtlMs())
	if err := s.store.RaiseLogVersion(resp.GetLogVersion()); err != nil {
		s.logVersionRefused(err)
	}
	s.rejoinGossip()
}

// heartbeatRates turns the node's rejection counter into a rate between
// heartbeats (only the heartbeat loop uses it).
type heartbeatRates struct {
	at       time.Time
	rejected uint64
}

func (h *heartbeatRates) rejectedRate(total uint64, now time.Time) float64 {
	var rate float64
	if dt := now.Sub(h.at).Seconds(); !h.at.IsZero() && dt > 0 && total >= h.rejected {
		rate = float64(total-h.rejected) / dt
	}
	h.at, h.rejected = now, total
	return rate
}

func (s *Server) report(d *tidekvpb.RangeDescriptor) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var term uint64
	changing := false
	if r := s.store.GetReplica(d.GetRangeId()); r != nil {
		term, changing = r.LeaderTerm(), r.ChangeInProgress()
	}
	l := s.rangeLoadOf(d, term)
	req := &tidekvpb.ReportRangeRequest{Desc: d, LeaderNodeId: s.nodeID, Qps: l.QPS, ReadQps: l.ReadQPS, Bytes: l.Bytes,
		HotKeyShare: l.HotKeyShare, LeaseTerm: l.Term, LoadStale: l.Stale, ChangeInProgress: changing,
		GarbageBytes: s.gc.Garbage(d.GetRangeId()), Keys: l.Keys, WritesByOrigin: l.Writes}
	_, err := callMeta(ctx, s, func(ctx context.Context, r *raftstore.Replica) (*tidekvpb.ReportRangeResponse, error) {
		return s.metaRange().ReportRange(ctx, r, req)
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
		case <-s.stopper:
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
