package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/placement"
)

func nodeSubject(id uint64) string  { return fmt.Sprintf("node %d", id) }
func rangeSubject(id uint64) string { return fmt.Sprintf("range %d", id) }

// clusterEvents gathers every known node's events (this node's directly),
// newest limit of them. Nodes that do not answer within a second are left
// out: an event log must not hang on a dead node.
func (s *Server) clusterEvents(ctx context.Context, limit int) []*tidekvpb.Event {
	lists := [][]*tidekvpb.Event{s.events.List(limit)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range s.dir.List() {
		if n.GetNodeId() == s.nodeID || n.GetGrpcAddr() == "" {
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
	meta := s.metaLeader()
	if meta == nil {
		return
	}
	s.meta.mu.Lock()
	settled := time.Since(s.meta.since) >= 3*s.cfg.HeartbeatInterval
	s.meta.mu.Unlock()
	if !settled {
		return // liveness is still being learnt from heartbeats
	}
	nodes := s.dir.List()
	statuses := s.nodeStatuses(nodes, time.Now())
	s.metrics.SetImbalance(placement.ImbalanceOf(statuses))
	s.meta.mu.Lock()
	defer s.meta.mu.Unlock()
	for _, ns := range statuses {
		id := ns.GetNode().GetNodeId()
		st := ns.GetState()
		if strings.HasPrefix(st, "bootstrap") || st == stateDraining || st == stateDrained {
			st = stateLive // phases and draining have events of their own
		}
		prev, seen := s.meta.states[id]
		if prev == st {
			continue
		}
		s.meta.states[id] = st
		switch {
		case !seen && (st == stateLive || st == stateUnknown):
			// First sight after becoming leaseholder: not news.
		case st == stateLive:
			s.events.Record("node-live", nodeSubject(id), "heartbeats resumed (was %s)", prev)
		case st == stateSuspect:
			s.events.Record("node-suspect", nodeSubject(id), "no heartbeat for %.1fs (liveness timeout %v)", ns.GetLastSeenSeconds(), s.cfg.LivenessTimeout)
		case st == stateDead:
			s.events.Record("node-dead", nodeSubject(id), "silent for more than %v: its replicas are replaced on live nodes", s.cfg.Control.DeadNodeGrace)
		case st == stateDecommissioned:
			s.events.Record("node-decommissioned", nodeSubject(id), "drained and stopped: it owns nothing")
		}
	}
}
