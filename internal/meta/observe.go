package meta

import (
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/rangeload"
)

// Observe assembles what the control loop looks at: the ranges of the
// directory resp and the meta range metaDesc (led by self, the meta
// leaseholder), the nodes as statuses names them, and what each node's
// last heartbeat in t said.
func (t *Table) Observe(self uint64, metaDesc *tidekvpb.RangeDescriptor, resp *tidekvpb.RangesResponse, statuses []*tidekvpb.NodeStatus, now time.Time) control.Observation {
	obs := control.Observation{Now: now}
	ranges := append([]*tidekvpb.RangeInfo{{Desc: metaDesc, LeaderNodeId: self}}, resp.GetRanges()...)
	for _, ri := range ranges {
		d := ri.GetDesc()
		r := placement.Range{ID: d.GetRangeId(), Start: d.GetStartKey(), End: d.GetEndKey(), Generation: d.GetGeneration(), Leaseholder: ri.GetLeaderNodeId(),
			Bytes: ri.GetBytes(), QPS: ri.GetQps(), ReadQPS: ri.GetReadQps(), HotKeyShare: ri.GetHotKeyShare(),
			MergingInto: d.GetMergingInto(), LoadStale: ri.GetLoadStale(), Writes: ri.GetWritesByOrigin(),
			ChangeInProgress: ri.GetChangeInProgress()}
		if r.ID == keys.MetaRangeID {
			// The meta range lives in its own key space: never split or
			// merged, only replicated and balanced.
			r.Start, r.End, r.Bytes, r.QPS, r.ReadQPS = nil, nil, 0, 0, 0
			r.ControlLoop = true
		}
		for _, rd := range d.GetReplicas() {
			typ := placement.Voter
			if rd.GetType() == tidekvpb.ReplicaType_LEARNER {
				typ = placement.Learner
			}
			r.Replicas = append(r.Replicas, placement.Replica{Node: rd.GetNodeId(), Type: typ, Adaptive: rd.GetAdaptive()})
		}
		obs.Ranges = append(obs.Ranges, r)
	}
	obs.Signals = make(map[uint64]control.NodeSignal, len(statuses))
	t.addReplicaReads(obs.Ranges, statuses)
	for _, ns := range statuses {
		n := ns.GetNode()
		obs.Nodes = append(obs.Nodes, placement.Node{ID: n.GetNodeId(), Locality: n.GetLocality(),
			State: PlacementState(ns), Bytes: ns.GetBytes(), QPS: ns.GetQps(), CPU: ns.GetCpu(), Score: ns.GetScore(),
			ClockUntrusted: ns.GetClockUntrusted()})
		sig := control.NodeSignal{Addr: n.GetGrpcAddr(), Ops: ns.GetQps(), CPU: ns.GetCpu(),
			P99: time.Duration(ns.GetP99Ms() * float64(time.Millisecond))}
		if hb := t.LastHeartbeat(n.GetNodeId()); hb != nil {
			sig.Rejected, sig.QueueUtil, sig.ReadShare = hb.GetRejectedQps(), hb.GetQueueUtil(), hb.GetReadShare()
		}
		obs.Signals[n.GetNodeId()] = sig
	}
	return obs
}

// addReplicaReads adds to each range the reads its other replicas
// served, as the live nodes' last heartbeats report them for the range's
// current span. A node that is not dead but whose heartbeat is missing or
// late (not live) may be serving reads nobody counted: the ranges with a
// replica on it get ReplicaReadsUnknown rather than zero for its share.
func (t *Table) addReplicaReads(ranges []placement.Range, statuses []*tidekvpb.NodeStatus) {
	at := make(map[uint64]*placement.Range, len(ranges))
	for i := range ranges {
		at[ranges[i].ID] = &ranges[i]
	}
	unreported := map[uint64]bool{}
	for _, ns := range statuses {
		id := ns.GetNode().GetNodeId()
		hb := t.LastHeartbeat(id)
		if !ns.GetLive() || hb == nil {
			unreported[id] = PlacementState(ns) != placement.NodeDead
			continue
		}
		for _, rr := range hb.GetReplicaReads() {
			r := at[rr.GetRangeId()]
			if r != nil && !r.ControlLoop && sameSpan(r, rr) && r.Leaseholder != id {
				r.ReplicaReadQPS += rr.GetReadQps()
			}
		}
	}
	for i := range ranges {
		for _, rep := range ranges[i].Replicas {
			if rep.Node != ranges[i].Leaseholder && unreported[rep.Node] {
				ranges[i].ReplicaReadsUnknown = true
			}
		}
	}
}

// sameSpan reports whether a node's replica reads rr were counted over
// range r's current span. A node from before spans sends none: its reads
// count at r's generation only.
func sameSpan(r *placement.Range, rr *tidekvpb.ReplicaReads) bool {
	if len(rr.GetStartKey()) == 0 && len(rr.GetEndKey()) == 0 && rr.GetGeneration() != 0 {
		return rr.GetGeneration() == r.Generation
	}
	return rangeload.SpanOf(rr).Equal(rangeload.Span{Start: r.Start, End: r.End})
}

// PlacementState maps a node's status to what placement acts on.
func PlacementState(ns *tidekvpb.NodeStatus) placement.NodeState {
	switch ns.GetState() {
	case StateDead:
		return placement.NodeDead
	case StateDraining, StateDrained:
		return placement.NodeDraining
	case StateSuspect, StateUnknown:
		return placement.NodeSuspect
	}
	return placement.NodeLive
}
