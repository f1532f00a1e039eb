package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/httpapi"
	"github.com/tidekv/tidekv/internal/keys"
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
