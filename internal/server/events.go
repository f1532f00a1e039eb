package server

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/meta"
	"github.com/tidekv/tidekv/internal/placement"
)

// clusterEvents gathers every known node's events (this node's directly),
// newest limit of them. Nodes that do not answer within a second are left
// out: an event log must not hang on a dead node.
func (s *Server) clusterEvents(ctx context.Context, limit int) []*tidekvpb.Event {
	lists := [][]*tidekvpb.Event{s.events.List(limit)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range s.peers.dir.List() {
		if n.GetNodeId() == s.id.node || n.GetGrpcAddr() == "" {
			continue
		}
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			resp, err := tidekvpb.NewAdminClient(s.conn(addr)).Events(cctx, &tidekvpb.EventsRequest{Local: true, Limit: uint32(limit)})
			if err != nil {
				return
			}
			mu.Lock()
			lists = append(lists, resp.GetEvents())
			mu.Unlock()
		}(n.GetGrpcAddr())
	}
	wg.Wait()
	return events.Merge(limit, lists...)
}

// watchLiveness, on the meta leaseholder, records an event whenever a
// node's state changes and exports the imbalance indices.
func (s *Server) watchLiveness(ctx context.Context) {
	if s.metaLeader() == nil {
		return
	}
	if !s.meta.table.Settled(time.Now(), 3*s.cfg.HeartbeatInterval) {
		return // liveness is still being learnt from heartbeats
	}
	nodes := s.peers.dir.List()
	statuses := s.nodeStatuses(nodes, time.Now())
	s.metrics.SetImbalance(placement.ImbalanceOf(statuses))
	for _, ns := range statuses {
		id := ns.GetNode().GetNodeId()
		st := ns.GetState()
		if strings.HasPrefix(st, "bootstrap") || st == meta.StateDraining || st == meta.StateDrained {
			st = meta.StateLive // phases and draining have events of their own
		}
		prev, seen, changed := s.meta.table.Announce(id, st)
		if !changed {
			continue
		}
		switch {
		case !seen && (st == meta.StateLive || st == meta.StateUnknown):
			// First sight after becoming leaseholder: not news.
		case st == meta.StateLive:
			s.events.Record("node-live", events.NodeSubject(id), "heartbeats resumed (was %s)", prev)
		case st == meta.StateSuspect:
			s.events.Record("node-suspect", events.NodeSubject(id), "no heartbeat for %.1fs (liveness timeout %v)", ns.GetLastSeenSeconds(), s.cfg.LivenessTimeout)
		case st == meta.StateDead:
			s.events.Record("node-dead", events.NodeSubject(id), "silent for more than %v: its replicas are replaced on live nodes", s.cfg.Control.DeadNodeGrace)
		case st == meta.StateDecommissioned:
			s.events.Record("node-decommissioned", events.NodeSubject(id), "drained and stopped: it owns nothing")
		}
	}
}
