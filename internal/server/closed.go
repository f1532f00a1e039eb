package server

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/clockwatch"
)

// Every ClosedTimestampInterval the node with the lower ID of each pair
// sends the other its closed timestamps and its load (internal/closedpush);
// the answer carries the receiver's.

// pushNode is the node as its side transport sees it.
type pushNode struct{ s *Server }

func (n pushNode) ID() uint64                        { return n.s.id.node }
func (n pushNode) Peers() []*tidekvpb.NodeDescriptor { return n.s.peers.dir.List() }
func (n pushNode) Blocked(peer uint64) bool          { return n.s.cfg.Transport.Partition.Blocked(peer) }
func (n pushNode) Delay(peer uint64) time.Duration {
	return n.s.cfg.Transport.Delays.Get(n.s.id.node, peer)
}
func (n pushNode) DelayFrom(peer uint64) time.Duration {
	return n.s.cfg.Transport.Delays.Get(peer, n.s.id.node)
}
func (n pushNode) Conn(addr string) grpc.ClientConnInterface { return n.s.conn(addr) }
func (n pushNode) Load() *tidekvpb.NodeLoad                  { return n.s.report.Load() }
func (n pushNode) Stamp() *tidekvpb.Timestamp                { return tidekvpb.FromHLC(n.s.store.HLC().Now()) }
func (n pushNode) Begin() clockwatch.Sample                  { return n.s.clock.Begin() }

func (n pushNode) Closed() map[uint64][]*tidekvpb.ClosedTimestamp {
	return n.s.store.ClosedTimestamps(n.s.store.Now())
}

func (n pushNode) Answered(peer uint64, sample clockwatch.Sample, now time.Time, resp *tidekvpb.ClosedTimestampsResponse) bool {
	return n.s.clock.NotePushAnswer(n.s.store.HLC(), peer, sample, now, resp) == nil
}

func (n pushNode) Estimate(peer uint64) *tidekvpb.OffsetEstimate {
	return n.s.clock.Estimate(peer, time.Now())
}

func (n pushNode) Apply(closed []*tidekvpb.ClosedTimestamp) { n.s.store.ApplyClosedTimestamps(closed) }

func (a *adminService) PushClosedTimestamps(ctx context.Context, req *tidekvpb.ClosedTimestampsRequest) (*tidekvpb.ClosedTimestampsResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	if a.s.cfg.Transport.Partition.Blocked(req.GetFromNodeId()) {
		return nil, status.Error(codes.Unavailable, "cut off by an injected partition")
	}
	// Closed timestamps from a node whose clock runs beyond the maximum
	// offset ahead would let followers serve reads staler than their bound.
	from := req.GetFromNodeId()
	if a.s.updateClock(req.GetHlc(), "node "+strconv.FormatUint(from, 10)) == nil {
		a.s.store.ApplyClosedTimestamps(req.GetClosed())
	}
	a.s.peers.push.Heard(req)
	a.s.clock.NoteEstimate(from, req.GetOffset(), time.Now())
	resp := &tidekvpb.ClosedTimestampsResponse{Load: a.s.report.Load()}
	if req.GetExchange() {
		// The sender gets this node's closed timestamps only from this
		// answer: this node does not push to it.
		resp.Closed = a.s.store.ClosedTimestampsTo(a.s.store.Now(), from)
	}
	resp.Hlc = tidekvpb.FromHLC(a.s.store.HLC().Now())
	resp.UnixNanos = a.s.clock.Answer(from).UnixNano()
	return resp, nil
}

func (a *adminService) NodeLoads(ctx context.Context, req *tidekvpb.NodeLoadsRequest) (*tidekvpb.NodeLoadsResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	a.s.peers.push.Note(a.s.report.Load())
	return &tidekvpb.NodeLoadsResponse{Loads: a.s.peers.push.Loads()}, nil
}
