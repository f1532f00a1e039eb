package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
)

// testCluster runs n in-process nodes on loopback with in-memory engines.
type testCluster struct {
	t     testing.TB
	nodes []*Server
	cfgs  []Config
}

func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.HTTPAddr = ""
	cfg.InMemory = true
	cfg.Raft.TickInterval = 20 * time.Millisecond
	cfg.Raft.MaxClockOffset = 80 * time.Millisecond // the most a 200 ms election timeout allows
	cfg.HeartbeatInterval = 100 * time.Millisecond
	cfg.LivenessTimeout = time.Second
	cfg.ReportInterval = 300 * time.Millisecond
	cfg.Control.Interval = 100 * time.Millisecond
	cfg.Control.DeadNodeGrace = 3 * time.Second
	// Tests move replicas and leases by hand; placement only keeps the
	// replication factor unless a test turns rebalancing on.
	cfg.Placement.Rebalance = false
	cfg.ReplicaGCInterval = time.Second
	// The nodes of a test share one process and one Go scheduler (and the
	// machine with other test packages), so a queueing delay is every
	// node's at once: delay-based admission is off here and tested on its
	// own (admission_test.go).
	cfg.Admission.Target = 0
	return cfg
}

func startCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	return startClusterWith(t, n, nil)
}

// startClusterWith starts n nodes, letting adjust change each node's config.
func startClusterWith(t testing.TB, n int, adjust func(*Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		cfg := testConfig(t)
		if adjust != nil {
			adjust(&cfg)
		}
		if i > 0 {
			cfg.Join = []string{tc.nodes[0].Addr()}
		}
		s, err := Start(ctx, cfg)
		if err != nil {
			t.Fatalf("start node %d: %v", i+1, err)
		}
		tc.nodes = append(tc.nodes, s)
		tc.cfgs = append(tc.cfgs, cfg)
	}
	t.Cleanup(func() {
		for _, s := range tc.nodes {
			if s != nil {
				s.Stop()
			}
		}
	})
	return tc
}

// holdControl stops every node's control rounds (placement, autoscale)
// until the returned release is called: a round waits for the controller's
// lock, which the hold takes on every node.
func (tc *testCluster) holdControl() (release func()) {
	var releases []func()
	for _, s := range tc.nodes {
		releases = append(releases, s.meta.ctl.Hold())
	}
	return func() {
		for _, release := range releases {
			release()
		}
	}
}

func (tc *testCluster) addrs() []string {
	var out []string
	for _, s := range tc.nodes {
		if s != nil {
			out = append(out, s.Addr())
		}
	}
	return out
}

func (tc *testCluster) client(adjust ...func(*client.Config)) *client.Client {
	cfg := client.DefaultConfig()
	cfg.Addrs = tc.addrs()
	for _, a := range adjust {
		a(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Cleanup(func() { c.Close() })
	return c
}

// waitReplicated waits until every range has want voters.
func (tc *testCluster) waitReplicated(c *client.Client, want int) {
	tc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := c.Ranges(ctx)
		cancel()
		if err == nil {
			ok := true
			last = ""
			for _, ri := range resp.GetRanges() {
				voters := 0
				for _, rd := range ri.GetDesc().GetReplicas() {
					if rd.GetType() == tidekvpb.ReplicaType_VOTER {
						voters++
					}
				}
				last += fmt.Sprintf("r%d:%d ", ri.GetDesc().GetRangeId(), voters)
				ok = ok && voters == want
			}
			if ok && len(resp.GetRanges()) > 0 && tc.metaVoters() == want {
				return
			}
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	tc.t.Fatalf("ranges not replicated %d-way: %s", want, last)
}

func (tc *testCluster) metaVoters() int {
	for _, s := range tc.nodes {
		if s == nil {
			continue
		}
		if r := s.metaLeader(); r != nil {
			n := 0
			for _, rd := range r.Desc().GetReplicas() {
				if rd.GetType() == tidekvpb.ReplicaType_VOTER {
					n++
				}
			}
			return n
		}
	}
	return 0
}

func TestClusterReplicatesAndServes(t *testing.T) {
	tc := startCluster(t, 3)
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 50; i++ {
		if err := c.Put(ctx, []byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	v, err := c.Get(ctx, []byte("k007"))
	if err != nil || string(v) != "v7" {
		t.Fatalf("get k007 = %q, %v", v, err)
	}
	if _, err := c.Get(ctx, []byte("missing")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := c.Split(ctx, []byte("k025")); err != nil {
		t.Fatalf("split: %v", err)
	}
	// At once again, inside the new right-hand range (its leader may still
	// be being elected).
	if _, err := c.Split(ctx, []byte("k040")); err != nil {
		for _, n := range tc.nodes {
			for _, r := range n.Store().Replicas() {
				st := r.Status()
				t.Logf("node %d range %d replica %d leader=%v leaderNode=%d term=%d commit=%d applied=%d desc=%v", n.NodeID(), st.RangeID, st.ReplicaID, st.Leader, r.LeaderNodeID(), st.Term, st.Commit, st.Applied, st.Desc)
			}
		}
		t.Fatalf("second split: %v", err)
	}
	kvs, err := c.Scan(ctx, []byte("k"), nil, 0)
	if err != nil || len(kvs) != 50 {
		t.Fatalf("scan across split: %d keys, %v", len(kvs), err)
	}
	for i, kv := range kvs {
		if string(kv.Key) != fmt.Sprintf("k%03d", i) {
			t.Fatalf("scan[%d] = %q", i, kv.Key)
		}
	}
}
