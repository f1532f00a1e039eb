package server

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Every ClosedTimestampInterval each node sends every other node one
// message: the closed timestamps of the ranges it leads that have a replica
// there (raftstore/closed.go) and its own load. The answer carries the
// receiver's load. So followers can serve BOUNDED reads, and every node
// (and clients, through NodeLoads) knows every node's load a fraction of a
// second old, at one small message per node pair per interval.

// loadTable holds the newest load heard from each node.
type loadTable struct {
	mu    sync.Mutex
	loads map[uint64]*tidekvpb.NodeLoad
}

func (t *loadTable) note(l *tidekvpb.NodeLoad) {
	if l == nil || l.GetNodeId() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.loads == nil {
		t.loads = map[uint64]*tidekvpb.NodeLoad{}
	}
	if cur := t.loads[l.GetNodeId()]; cur == nil || cur.GetUnixNanos() <= l.GetUnixNanos() {
		t.loads[l.GetNodeId()] = l
	}
}

func (t *loadTable) list() []*tidekvpb.NodeLoad {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*tidekvpb.NodeLoad, 0, len(t.loads))
	for _, l := range t.loads {
		out = append(out, l)
	}
	return out
}

// ownLoad is this node's load from its latest monitor sample.
func (s *Server) ownLoad() *tidekvpb.NodeLoad {
	adm := s.adm.State()
	l := &tidekvpb.NodeLoad{NodeId: s.nodeID, QueueDepth: uint32(adm.Inflight), UnixNanos: time.Now().UnixNano(),
		QueueDelayMs: ms(max(adm.QueueDelay, 0)), AdmitShare: adm.AdmitShare, Overloaded: adm.Overloaded,
		ClockUntrusted: s.store.ClockUntrusted() != ""}
	if snap := s.mon.Latest(); snap != nil {
		l.Cpu, l.Score = snap.Usage.NodeCPU(), snap.Score
	}
	return l
}

// pushClosed sends this round's messages, one per peer, without waiting; a
// peer whose previous message is still on its way is skipped this round.
func (s *Server) pushClosed(context.Context) {
	byPeer := s.store.ClosedTimestamps(s.store.Now())
	load := s.ownLoad()
	s.loads.note(load)
	for _, n := range s.dir.List() {
		peer := n.GetNodeId()
		if peer == s.nodeID || n.GetGrpcAddr() == "" || s.cfg.Transport.Partition.Blocked(peer) {
			continue
		}
		busy := s.pushing(peer)
		if !busy.CompareAndSwap(false, true) {
			continue
		}
		req := &tidekvpb.ClosedTimestampsRequest{FromNodeId: s.nodeID, Closed: byPeer[peer], Load: load}
		go func(peer uint64, addr string) {
			defer busy.Store(false)
			// Emulated WAN latency applies to this traffic too, or
			// followers far away would look fresher than they are.
			if d := s.cfg.Transport.Delays.Get(s.nodeID, peer); d > 0 {
				select {
				case <-time.After(d):
				case <-s.stopper:
					return
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			// The send and receive times bracket the peer's answer for
			// the offset estimate (clock.go).
			req.Hlc = tidekvpb.FromHLC(s.store.HLC().Now())
			sample := s.clock.Begin()
			resp, err := tidekvpb.NewAdminClient(s.conn(addr)).PushClosedTimestamps(ctx, req)
			if err == nil {
				s.clock.NotePushAnswer(s.store.HLC(), peer, sample, time.Now(), resp)
				s.loads.note(resp.GetLoad())
			}
		}(peer, n.GetGrpcAddr())
	}
}

func (s *Server) pushing(peer uint64) *atomic.Bool {
	v, _ := s.pushBusy.LoadOrStore(peer, new(atomic.Bool))
	return v.(*atomic.Bool)
}

func (a *adminService) PushClosedTimestamps(ctx context.Context, req *tidekvpb.ClosedTimestampsRequest) (*tidekvpb.ClosedTimestampsResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	if a.s.cfg.Transport.Partition.Blocked(req.GetFromNodeId()) {
		return nil, status.Error(codes.Unavailable, "cut off by an injected partition")
	}
	// Closed timestamps from a node whose clock runs beyond the maximum
	// offset ahead would let followers serve reads staler than their bound.
	if a.s.updateClock(req.GetHlc(), "node "+strconv.FormatUint(req.GetFromNodeId(), 10)) == nil {
		a.s.store.ApplyClosedTimestamps(req.GetClosed())
	}
	a.s.loads.note(req.GetLoad())
	return &tidekvpb.ClosedTimestampsResponse{Load: a.s.ownLoad(), Hlc: tidekvpb.FromHLC(a.s.store.HLC().Now()), UnixNanos: a.s.clock.WallNow().UnixNano()}, nil
}

func (a *adminService) NodeLoads(ctx context.Context, req *tidekvpb.NodeLoadsRequest) (*tidekvpb.NodeLoadsResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	a.s.loads.note(a.s.ownLoad())
	return &tidekvpb.NodeLoadsResponse{Loads: a.s.loads.list()}, nil
}
