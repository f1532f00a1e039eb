package meta

import (
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/placement"
)

// The observation counts a range's reads served by its other replicas
// from the live nodes' heartbeats (over the range's current span only,
// whatever replica changes came since, never the leaseholder's own), marks them unknown where a replica sits on a
// node neither live nor dead, and keeps the meta range out of splits and
// merges.
func TestObserveReplicaReads(t *testing.T) {
	tb, now := NewTable(), time.Unix(1000, 0)
	node := func(id uint64) *tidekvpb.NodeDescriptor { return &tidekvpb.NodeDescriptor{NodeId: id} }
	tb.Heartbeat(now, &tidekvpb.NodeHeartbeatRequest{Node: node(2), RejectedQps: 3, ReplicaReads: []*tidekvpb.ReplicaReads{
		// counted: sampled before a replica change (generation 3), same span
		{RangeId: 5, StartKey: []byte("a"), EndKey: []byte("m"), ReadQps: 10},
		// an older span of range 6 (before it merged its right neighbour): not counted
		{RangeId: 6, StartKey: []byte("m"), EndKey: []byte("q"), ReadQps: 99},
	}})
	// A node from before spans sends the generation only: counted at the
	// range's current generation, not at an older one.
	tb.Heartbeat(now, &tidekvpb.NodeHeartbeatRequest{Node: node(4), ReplicaReads: []*tidekvpb.ReplicaReads{
		{RangeId: 5, Generation: 4, ReadQps: 5},
		{RangeId: 5, Generation: 3, ReadQps: 50},
	}})
	tb.Heartbeat(now, &tidekvpb.NodeHeartbeatRequest{Node: node(1), ReplicaReads: []*tidekvpb.ReplicaReads{
		{RangeId: 5, StartKey: []byte("a"), EndKey: []byte("m"), ReadQps: 7}, // the leaseholder's own: not counted
	}})
	rep := func(ids ...uint64) (out []*tidekvpb.ReplicaDescriptor) {
		for _, id := range ids {
			out = append(out, &tidekvpb.ReplicaDescriptor{NodeId: id})
		}
		return out
	}
	resp := &tidekvpb.RangesResponse{Ranges: []*tidekvpb.RangeInfo{
		{Desc: &tidekvpb.RangeDescriptor{RangeId: 5, Generation: 4, StartKey: []byte("a"), EndKey: []byte("m"), Replicas: rep(1, 2)}, LeaderNodeId: 1},
		{Desc: &tidekvpb.RangeDescriptor{RangeId: 6, Generation: 2, StartKey: []byte("m"), Replicas: rep(1, 2, 3)}, LeaderNodeId: 1},
	}}
	statuses := []*tidekvpb.NodeStatus{
		{Node: node(1), Live: true, State: StateLive},
		{Node: node(2), Live: true, State: StateLive},
		{Node: node(3), State: StateSuspect}, // no heartbeat, not dead
		{Node: node(4), Live: true, State: StateLive},
	}
	metaDesc := &tidekvpb.RangeDescriptor{RangeId: keys.MetaRangeID, Replicas: rep(1, 2, 3)}
	obs := tb.Observe(1, metaDesc, resp, statuses, now)

	if len(obs.Ranges) != 3 || obs.Ranges[0].ID != keys.MetaRangeID || !obs.Ranges[0].ControlLoop || obs.Ranges[0].Leaseholder != 1 {
		t.Fatalf("ranges %+v: want the meta range first, led here, under the control loop only", obs.Ranges)
	}
	if r := obs.Ranges[1]; r.ReplicaReadQPS != 15 || r.ReplicaReadsUnknown {
		t.Fatalf("range 5: replica reads %v (unknown %v), want 10 + 5, known", r.ReplicaReadQPS, r.ReplicaReadsUnknown)
	}
	if r := obs.Ranges[2]; r.ReplicaReadQPS != 0 || !r.ReplicaReadsUnknown {
		t.Fatalf("range 6: replica reads %v (unknown %v), want 0, unknown (a replica on suspect node 3)", r.ReplicaReadQPS, r.ReplicaReadsUnknown)
	}
	if st := obs.Nodes[2].State; st != placement.NodeSuspect {
		t.Fatalf("node 3: %v, want suspect", st)
	}
	if sig := obs.Signals[2]; sig.Rejected != 3 {
		t.Fatalf("node 2's signal %+v: want its heartbeat's rejected rate", sig)
	}
}
