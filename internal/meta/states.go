package meta

import (
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/gossip"
)

// Node states as shown to operators (and mapped to placement's).
const (
	StateLive    = "live"
	StateSuspect = "suspect" // heartbeats late: not live, not yet given up on
	StateUnknown = "unknown" // no heartbeat yet since this node became meta leaseholder
	StateDead    = "dead"    // silent beyond DeadNodeGrace: its replicas are replaced
	// Decommissioning: replicas moving away; drained once it holds none;
	// decommissioned once it also stopped.
	StateDraining       = "draining"
	StateDrained        = "drained"
	StateDecommissioned = "decommissioned"
)

// GossipView is what gossip says of a node: its state and since when; ok
// is false with gossip off or before gossip heard of it.
type GossipView func(node uint64) (st gossip.State, since time.Time, ok bool)

// Liveness are the durations that name a node's state.
type Liveness struct {
	// Timeout: a node heard from within it is live.
	Timeout time.Duration
	// DeadGrace: a node silent (or down by gossip) for it is dead.
	DeadGrace time.Duration
}

// Statuses combines the node records with what their heartbeats said, at
// now, and names each one's state (StateOf).
func (t *Table) Statuses(nodes []*tidekvpb.NodeDescriptor, now time.Time, lv Liveness, g GossipView) []*tidekvpb.NodeStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*tidekvpb.NodeStatus, 0, len(nodes))
	for _, n := range nodes {
		ns := &tidekvpb.NodeStatus{Node: n, LastSeenSeconds: -1}
		silent := now.Sub(t.since) // never heard from: silent since we took over
		if l := t.nodes[n.GetNodeId()]; l != nil {
			silent = now.Sub(l.lastSeen)
			ns.LastSeenSeconds = silent.Seconds()
			hb := l.hb
			ns.Replicas, ns.Leases, ns.Bytes, ns.Qps = hb.GetReplicas(), hb.GetLeases(), hb.GetBytes(), hb.GetQps()
			ns.Cpu, ns.Score, ns.P99Ms, ns.CpuQuota = hb.GetCpu(), hb.GetScore(), hb.GetP99Ms(), hb.GetCpuQuota()
			ns.QueueDelayMs, ns.AdmitShare, ns.Overloaded, ns.RejectedQps = hb.GetQueueDelayMs(), hb.GetAdmitShare(), hb.GetOverloaded(), hb.GetRejectedQps()
			ns.ClockUntrusted, ns.ClockReason, ns.MaxClockOffsetMs = hb.GetClockUntrusted(), hb.GetClockReason(), hb.GetMaxClockOffsetMs()
			ns.Live = silent < lv.Timeout
		}
		gs, gsince, gok := g(n.GetNodeId())
		ns.State = StateOf(n, ns, silent, now, lv.DeadGrace, gs, gsince, gok)
		out = append(out, ns)
	}
	return out
}

// StateOf names a node's state from how long it has been silent and, with
// gossip on (gok), from what gossip says (gs since gsince): unreachable by
// gossip for the grace period is dead even if an old heartbeat is recent;
// unreachable at all is at least suspect.
func StateOf(n *tidekvpb.NodeDescriptor, ns *tidekvpb.NodeStatus, silent time.Duration, now time.Time, deadGrace time.Duration,
	gs gossip.State, gsince time.Time, gok bool) string {
	heard := ns.GetLastSeenSeconds() >= 0
	gossipDown := gok && (gs == gossip.Dead || gs == gossip.Left)
	switch {
	case gossipDown && now.Sub(gsince) >= deadGrace && !(n.GetDraining() && ns.GetReplicas() == 0):
		return StateDead
	case gok && gs != gossip.Alive && ns.GetLive():
		return StateSuspect
	case !heard && (!gok || gs == gossip.Alive) && silent < 2*deadGrace && !gossipDown:
		// Not heard from yet, but not known to be gone either: a node
		// that joined after this leaseholder took over, about to
		// heartbeat. (One silent past twice the grace is given up on.)
		return StateUnknown
	case n.GetDraining() && ns.GetReplicas() == 0 && heard && !ns.GetLive():
		return StateDecommissioned
	case silent >= deadGrace:
		return StateDead
	case !heard:
		// Never heard from, and gossip cannot reach it (the cases above
		// took every other node not heard from).
		return StateSuspect
	case !ns.GetLive():
		return StateSuspect
	case n.GetDraining() && ns.GetReplicas() == 0:
		return StateDrained
	case n.GetDraining():
		return StateDraining
	}
	return StateLive
}
