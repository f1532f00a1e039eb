package server

import (
	"github.com/tidekv/tidekv/internal/monitor"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// nodeGauges is what the scrape-time gauges (metrics.Node) read of s.
type nodeGauges struct{ s *Server }

func (g nodeGauges) Replicas() (replicas, leases int) {
	if g.s.store == nil {
		return 0, 0
	}
	for _, r := range g.s.store.Replicas() {
		replicas++
		if r.IsLeader() {
			leases++
		}
	}
	return replicas, leases
}

func (g nodeGauges) SnapshotRate() float64 {
	if g.s.store == nil {
		return 0
	}
	return g.s.store.SnapshotRate()
}

func (g nodeGauges) MemoryKeySpaces() int { return g.s.ks.MemoryKeySpaces() }

func (g nodeGauges) AutoscaleTarget() int {
	if g.s.metaLeader() == nil {
		return 0
	}
	return g.s.meta.ctl.Status().TargetNodes
}

func (g nodeGauges) Usage() *monitor.Snapshot { return g.s.report.Monitor().Latest() }

func (g nodeGauges) StoreStats() *raftstore.Stats {
	if g.s.store == nil {
		return nil
	}
	return g.s.store.Stats()
}
