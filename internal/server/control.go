package server

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/actuator"
	"github.com/tidekv/tidekv/internal/adminroute"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/ctlloop"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/settings"
)

// The control loop (internal/ctlloop) runs on the meta range's
// leaseholder; here: the node as it sees it, and the operators' executor.

func newControlLoop(s *Server) *ctlloop.Loop {
	return ctlloop.New(ctlloop.Deps{Control: s.cfg.Control, Placement: s.cfg.Placement, Autoscale: s.cfg.Autoscale,
		Node: ctlNode{s}, Exec: opExecutor{s}, Spawn: s.bg.Go, Now: time.Now})
}

// placeLoop runs a control round every Control.Interval, and a
// placement-only round when woken, at most one per SizeWatchInterval so a
// burst of reports cannot keep the loop busy.
func (s *Server) placeLoop() {
	s.bg.Wakeable(s.cfg.Control.Interval, s.cfg.SizeWatchInterval, s.meta.ctl.Woken(), s.meta.ctl.Round, s.meta.ctl.Urgent)
}

// ctlNode is the node as its control loop sees it.
type ctlNode struct{ s *Server }

func (n ctlNode) MetaLeader() *raftstore.Replica { return n.s.metaLeader() }
func (n ctlNode) LivenessKnown() bool            { return n.s.liveNodes() != nil }
func (n ctlNode) Config() settings.Config        { return n.s.clusterConfig() }

func (n ctlNode) Ranges(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.RangesResponse, error) {
	return n.s.metaRange().Ranges(ctx, meta)
}

func (n ctlNode) Observe(meta *raftstore.Replica, resp *tidekvpb.RangesResponse, now time.Time) control.Observation {
	s := n.s
	obs := s.meta.table.Observe(s.id.node, meta.Desc(), resp, s.nodeStatuses(resp.GetNodes(), now), now)
	s.placeKeySpaces(&obs)
	return obs
}

func (n ctlNode) ReadState(ctx context.Context, meta *raftstore.Replica) ([]byte, error) {
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	return raftstore.ReadMetaControllerState(n.s.ks.Engine())
}

func (n ctlNode) SaveState(ctx context.Context, meta *raftstore.Replica, raw []byte) error {
	_, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{PutControllerState: raw})
	return err
}

func (n ctlNode) StoresState() bool {
	return n.s.store.LogVersion() >= raftstore.LogVersionControllerState
}

func (n ctlNode) Actuator(name string) (control.Actuator, error) {
	return actuator.New(name, n.s.cfg.Actuators)
}

// Decommission drains a node for a scale-in (or keeps it after all)
// through the admin path an operator's `ctl decommission` takes.
func (n ctlNode) Decommission(ctx context.Context, node uint64, drain bool) error {
	_, err := (&adminService{s: n.s}).Decommission(ctx, &tidekvpb.DecommissionRequest{NodeId: node, Drain: drain})
	return err
}

// Overflow exports the overflow policy's view of a key space that grows
// when full.
func (n ctlNode) Overflow(name string, threshold, fullest float64) {
	if k, ok := n.s.ks.Catalogue().ByName(name); ok {
		n.s.metrics.KeyspacePrelaunch.WithLabelValues(metrics.IDLabel(k.ID)).Set(threshold)
		n.s.metrics.KeyspaceFullest.WithLabelValues(metrics.IDLabel(k.ID)).Set(fullest)
	}
}

func (n ctlNode) Record(kind, subject, format string, args ...any) {
	n.s.events.Record(kind, subject, format, args...)
}

// opExecutor carries out operators through the range operations an
// operator's ctl commands run (rangeops.Ops.Execute, in process), so
// events and checks are the same.
type opExecutor struct{ s *Server }

func (x opExecutor) Execute(op placement.Operator, done func(error)) {
	s := x.s
	s.bg.Go(func() {
		ctx, cancel := s.bg.UntilStop(s.meta.ctl.OpTimeout())
		defer cancel()
		err := raftstore.ErrStopped
		if s.ports.ready.Load() { // as the admin service refuses before the node serves
			err = s.rangeOps().Execute(ctx, op)
		}
		if errors.Is(err, context.Canceled) {
			err = nil // the node is stopping: nothing to report
		}
		done(err)
	})
}

// AutoscaleStatus answers on the meta leaseholder (others forward): the
// elasticity controller's status as JSON.
func (a *adminService) AutoscaleStatus(ctx context.Context, req *tidekvpb.AutoscaleStatusRequest) (*tidekvpb.AutoscaleStatusResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := adminroute.Meta(ctx, s.peers.route, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.AutoscaleStatusResponse, error) {
		b, err := json.Marshal(s.meta.ctl.Status())
		if err != nil {
			return nil, err
		}
		return &tidekvpb.AutoscaleStatusResponse{Json: string(b)}, nil
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.AutoscaleStatusResponse, error) {
		return c.AutoscaleStatus(ctx, req)
	})
	return resp, s.toStatus(err)
}
