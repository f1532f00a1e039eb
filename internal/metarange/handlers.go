package metarange

import (
	"bytes"
	"context"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/kverr"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/meta"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/settings"
	"github.com/tidekv/tidekv/internal/storage"
)

// Node is the node as the meta range's handlers see it.
type Node interface {
	// ClusterID and ID name the cluster and this node.
	ClusterID() uint64
	ID() uint64
	// Engine holds the meta range's replicated directory.
	Engine() storage.Reader
	// Table is the meta leaseholder's in-memory table.
	Table() *meta.Table
	// GCTTL and SplitBytes are the cluster settings' gc-ttl and split size.
	GCTTL() time.Duration
	SplitBytes() uint64
	// MigrationRate is the control loop's migration allowance; WakePlace
	// wakes the loop early.
	MigrationRate() float64
	WakePlace()
	// Statuses are the node records with what their heartbeats said and
	// the controller's phases.
	Statuses(nodes []*tidekvpb.NodeDescriptor, now time.Time) []*tidekvpb.NodeStatus
	// BaseConfig is what the node was started with, before cluster
	// settings; SettingsChanged tells it that they changed.
	BaseConfig() settings.Config
	SettingsChanged()
	// LogVersion is the cluster's log version as this node knows it;
	// SetCatalogue gives the node's copy of the key space catalogue what
	// the meta range holds after a change.
	LogVersion() uint32
	SetCatalogue(cat ksconfig.Catalogue)
	// Record adds an event to the node's log.
	Record(kind, subject, reasonFormat string, args ...any)
}

// Handlers answer the meta range's admin calls on its leaseholder.
type Handlers struct{ Node Node }

// Ranges is the range directory and the node records.
func (h Handlers) Ranges(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.RangesResponse, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	eng := h.Node.Engine()
	descs, err := raftstore.ReadMetaRanges(eng)
	if err != nil {
		return nil, err
	}
	nodes, err := raftstore.ReadMetaNodes(eng)
	if err != nil {
		return nil, err
	}
	resp := &tidekvpb.RangesResponse{Nodes: nodes, Ranges: h.Node.Table().RangeInfos(descs)}
	sortRanges(resp.Ranges)
	return resp, nil
}

// sortRanges puts the meta range first, then the ranges by start key.
func sortRanges(rs []*tidekvpb.RangeInfo) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i].GetDesc(), rs[j].GetDesc()
		if (a.GetRangeId() == keys.MetaRangeID) != (b.GetRangeId() == keys.MetaRangeID) {
			return a.GetRangeId() == keys.MetaRangeID
		}
		return bytes.Compare(a.GetStartKey(), b.GetStartKey()) < 0
	})
}

// Join adds a node to the cluster and gives it its ID.
func (h Handlers) Join(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.JoinRequest) (*tidekvpb.JoinResponse, error) {
	if req.GetGrpcAddr() == "" {
		return nil, kverr.Invalid("join: grpc_addr is required")
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	active, err := h.checkJoinVersion(req)
	if err != nil {
		return nil, err
	}
	id, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{AddNode: &tidekvpb.NodeDescriptor{GrpcAddr: req.GetGrpcAddr(), HttpAddr: req.GetHttpAddr(), MaxLogVersion: req.GetMaxLogVersion()}})
	if err != nil {
		return nil, err
	}
	nodes, err := h.nodes(ctx, meta)
	if err != nil {
		return nil, err
	}
	h.Node.Record("node-join", events.NodeSubject(id), "joined the cluster from %s", req.GetGrpcAddr())
	return &tidekvpb.JoinResponse{ClusterId: h.Node.ClusterID(), NodeId: id, Nodes: nodes, LogVersion: active}, nil
}

// nodes reads the meta directory's node records once the meta lease
// covers the read.
func (h Handlers) nodes(ctx context.Context, meta *raftstore.Replica) ([]*tidekvpb.NodeDescriptor, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	return raftstore.ReadMetaNodes(h.Node.Engine())
}

// Heartbeat takes a node's heartbeat.
func (h Handlers) Heartbeat(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.NodeHeartbeatRequest) (*tidekvpb.NodeHeartbeatResponse, error) {
	nodes, err := h.nodes(ctx, meta)
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
	h.Node.Table().Heartbeat(time.Now(), req)
	version, err := h.raiseLogVersion(ctx, meta, nodes)
	if err != nil {
		return nil, err
	}
	return &tidekvpb.NodeHeartbeatResponse{Nodes: nodes, MigrationBytesPerSec: h.Node.MigrationRate(), LogVersion: version,
		GcTtlMs: h.Node.GCTTL().Milliseconds()}, nil
}

// ReportRange takes a leaseholder's report of its range.
func (h Handlers) ReportRange(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.ReportRangeRequest) (*tidekvpb.ReportRangeResponse, error) {
	d := req.GetDesc()
	if h.Node.Table().Report(req, h.Node.SplitBytes()) {
		h.Node.WakePlace()
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	if !h.directoryNeeds(d) {
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
func (h Handlers) directoryNeeds(d *tidekvpb.RangeDescriptor) bool {
	v, ok, err := h.Node.Engine().Get(keys.DataKey(keys.MetaRangeID, keys.MetaRangeKey(d.GetRangeId())))
	if err != nil || !ok {
		return true
	}
	stored := &tidekvpb.RangeDescriptor{}
	return proto.Unmarshal(v, stored) != nil || stored.GetGeneration() < d.GetGeneration()
}

// Status is the cluster's status: its nodes, range count, balance and log
// version.
func (h Handlers) Status(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.StatusResponse, error) {
	rs, err := h.Ranges(ctx, meta)
	if err != nil {
		return nil, err
	}
	resp := &tidekvpb.StatusResponse{ClusterId: h.Node.ClusterID(), NodeId: h.Node.ID(), RangeCount: uint32(len(rs.GetRanges()))}
	resp.Nodes = h.Node.Statuses(rs.GetNodes(), time.Now())
	resp.Imbalance = placement.ImbalanceOf(resp.Nodes)
	if resp.LogVersion, err = raftstore.ReadMetaLogVersion(h.Node.Engine()); err != nil {
		return nil, err
	}
	return resp, nil
}
