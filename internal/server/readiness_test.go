package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/httpapi"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/meta"
)

// getReady fetches GET /ready from addr.
func getReady(t *testing.T, addr string) (int, httpapi.ReadyView) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v httpapi.ReadyView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET /ready: %s, body not JSON: %v", resp.Status, err)
	}
	return resp.StatusCode, v
}

// waitReady polls GET /ready on addr until cond holds, and returns the last
// answer.
func waitReady(t *testing.T, addr string, cond func(int, httpapi.ReadyView) bool) (int, httpapi.ReadyView) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, v := getReady(t, addr)
		if cond(code, v) {
			return code, v
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /ready on %s: still %d %+v", addr, code, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReadyEndpoint: /ready answers 503 while ranges live on fewer nodes
// than the replication factor and 200 once every range, the meta range
// included, has a voter on each of the three nodes.
func TestReadyEndpoint(t *testing.T) {
	// Placement rounds are held back so that replication happens only when
	// the test asks for it.
	tc := startClusterWith(t, 3, func(c *Config) {
		c.HTTPAddr = "127.0.0.1:0"
		c.Control.Interval = time.Hour
	})
	addr := tc.nodes[1].HTTPAddr() // any node answers for the cluster
	_, v := waitReady(t, addr, func(code int, v httpapi.ReadyView) bool {
		return code == http.StatusServiceUnavailable && v.Reason == "the meta range has 1 of 3 voters on live nodes."
	})
	if v.Ready || v.NodeID != 2 || v.LiveNodes != 3 || v.ReplicationFactor != 3 {
		t.Fatalf("before replication: %+v", v)
	}

	c := tc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, rangeID := range []uint64{keys.MetaRangeID, keys.FirstUserRangeID} {
		for _, node := range []uint64{2, 3} {
			if _, err := c.ChangeReplicas(ctx, rangeID, node, 0); err != nil {
				t.Fatalf("add a replica of range %d on node %d: %v", rangeID, node, err)
			}
		}
	}
	_, v = waitReady(t, addr, func(code int, v httpapi.ReadyView) bool { return code == http.StatusOK })
	if !v.Ready || v.Reason != "" || v.Ranges != 2 || v.LiveNodes != 3 {
		t.Fatalf("after replication: %+v", v)
	}
}

func TestReplicationGap(t *testing.T) {
	node := func(id uint64, live bool, state string) *tidekvpb.NodeStatus {
		return &tidekvpb.NodeStatus{Node: &tidekvpb.NodeDescriptor{NodeId: id}, Live: live, State: state}
	}
	rng := func(id, leader uint64, reps ...*tidekvpb.ReplicaDescriptor) *tidekvpb.RangeInfo {
		return &tidekvpb.RangeInfo{Desc: &tidekvpb.RangeDescriptor{RangeId: id, Replicas: reps}, LeaderNodeId: leader}
	}
	voter := func(n uint64) *tidekvpb.ReplicaDescriptor {
		return &tidekvpb.ReplicaDescriptor{NodeId: n, Type: tidekvpb.ReplicaType_VOTER}
	}
	learner := &tidekvpb.ReplicaDescriptor{NodeId: 4, Type: tidekvpb.ReplicaType_LEARNER, Adaptive: true}
	incoming := &tidekvpb.ReplicaDescriptor{NodeId: 3, Type: tidekvpb.ReplicaType_VOTER_INCOMING}
	three := []*tidekvpb.NodeStatus{node(1, true, meta.StateLive), node(2, true, meta.StateLive), node(3, true, meta.StateLive)}
	draining := &tidekvpb.NodeStatus{Node: &tidekvpb.NodeDescriptor{NodeId: 4, Draining: true}, Live: true, State: meta.StateDraining}
	for _, tt := range []struct {
		name   string
		ranges []*tidekvpb.RangeInfo
		nodes  []*tidekvpb.NodeStatus
		live   int
		want   string
	}{
		{"fully replicated, an adaptive learner aside", []*tidekvpb.RangeInfo{rng(1, 1, voter(1), voter(2), voter(3)), rng(2, 2, voter(1), voter(2), voter(3), learner)}, three, 3, ""},
		{"meta range short", []*tidekvpb.RangeInfo{rng(1, 1, voter(1)), rng(2, 1, voter(1), voter(2), voter(3))}, three, 3, "the meta range has 1 of 3 voters on live nodes."},
		{"two live nodes need two voters", []*tidekvpb.RangeInfo{rng(1, 1, voter(1), voter(2), voter(3))}, []*tidekvpb.NodeStatus{node(1, true, meta.StateLive), node(2, true, meta.StateLive), node(3, false, meta.StateDead)}, 2, ""},
		{"a voter on a dead node does not count", []*tidekvpb.RangeInfo{rng(1, 1, voter(1), voter(2), voter(3)), rng(2, 1, voter(1), voter(3))}, []*tidekvpb.NodeStatus{node(1, true, meta.StateLive), node(2, true, meta.StateLive), node(3, false, meta.StateSuspect)}, 2, "range 2 has 1 of 2 voters on live nodes."},
		{"draining nodes are no target", []*tidekvpb.RangeInfo{rng(1, 1, voter(1), voter(2), voter(3))}, append(three, draining), 3, ""},
		{"replica change in flight", []*tidekvpb.RangeInfo{rng(2, 1, voter(1), voter(2), incoming)}, three, 3, "range 2 has a replica change in progress."},
		{"no leaseholder", []*tidekvpb.RangeInfo{rng(2, 0, voter(1), voter(2), voter(3))}, three, 3, "range 2 has no known leaseholder."},
		{"liveness unknown", []*tidekvpb.RangeInfo{rng(1, 1, voter(1))}, []*tidekvpb.NodeStatus{node(1, true, meta.StateLive), node(2, false, meta.StateUnknown)}, 0, "node 2 has not heartbeated to the meta leaseholder yet."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			live, got := replicationGap(tt.ranges, tt.nodes, 3)
			if live != tt.live || got != tt.want {
				t.Fatalf("replicationGap = %d, %q; want %d, %q", live, got, tt.live, tt.want)
			}
		})
	}
}
