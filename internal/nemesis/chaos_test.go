package nemesis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/security"
)

// A schedule has converged when every range has 3 voters, on live nodes
// only (a replaced node's old ID is not), a leaseholder, and, strictly, no
// other replica but adaptive learners.
func TestReplicatedErr(t *testing.T) {
	rng := func(nodes ...uint64) *tidekvpb.RangesResponse {
		d := &tidekvpb.RangeDescriptor{RangeId: 7}
		for _, n := range nodes {
			d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: n, Type: tidekvpb.ReplicaType_VOTER})
		}
		return &tidekvpb.RangesResponse{Ranges: []*tidekvpb.RangeInfo{{Desc: d, LeaderNodeId: nodes[0]}}}
	}
	live := map[uint64]bool{1: true, 2: true, 3: true, 5: true}
	for _, c := range []struct {
		resp *tidekvpb.RangesResponse
		want string
	}{
		{rng(1, 2, 3), ""},
		{rng(1, 2, 4), "replica on node 4, which is not live"},
		{rng(1, 2), "2 voters"},
		{rng(1, 2, 3, 5), "4 voters"},
		{&tidekvpb.RangesResponse{}, "no ranges"},
	} {
		err := replicatedErr(c.resp, live, true)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.resp, err, c.want)
		}
	}
}

// A secure run is refused, in one sentence and before any node starts,
// when it could not act as root or names users for insecure nodes.
func TestChaosSecurityRefused(t *testing.T) {
	c := DefaultChaosConfig()
	c.Binary = "tidekv"
	c.UsersFile = "users.json"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "needs a certs dir") {
		t.Errorf("users file without certs dir: %v", err)
	}
	dir := t.TempDir()
	if err := security.CreateCA(security.CertOptions{Dir: dir, Lifetime: time.Hour, Files: security.OSFiles{}, Now: time.Now}); err != nil {
		t.Fatal(err)
	}
	if _, err := chaosTLS(dir); err == nil || !strings.Contains(err.Error(), "no client.root.crt") {
		t.Errorf("certs dir without root's certificate: %v", err)
	}
}

// slowRestart is a target whose restarted node is ready only after ready,
// as a launcher's is: Restart returns then.
type slowRestart struct {
	fakeTarget
	ready time.Duration
}

func (f *slowRestart) Restart(_ context.Context, i int) error {
	time.Sleep(f.ready)
	return f.did("restart ", i)
}

// recoveringDir is a cluster whose range 7 has 2 voters for its first
// behind polls and then 3 with a leaseholder, on nodes 1 to 3, all live.
type recoveringDir struct{ polls, behind int }

func (d *recoveringDir) Ranges(context.Context) (*tidekvpb.RangesResponse, error) {
	d.polls++
	voters := []uint64{1, 2, 3}
	if d.polls <= d.behind {
		voters = voters[:2]
	}
	desc := &tidekvpb.RangeDescriptor{RangeId: 7}
	for _, n := range voters {
		desc.Replicas = append(desc.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: n, Type: tidekvpb.ReplicaType_VOTER})
	}
	return &tidekvpb.RangesResponse{Ranges: []*tidekvpb.RangeInfo{{Desc: desc, LeaderNodeId: 1}}}, nil
}

func (d *recoveringDir) Status(context.Context) (*tidekvpb.StatusResponse, error) {
	st := &tidekvpb.StatusResponse{}
	for n := range uint64(3) {
		st.Nodes = append(st.Nodes, &tidekvpb.NodeStatus{Node: &tidekvpb.NodeDescriptor{NodeId: n + 1}, Live: true})
	}
	return st, nil
}

// The convergence figure counts from the moment the last fault was
// lifted: it includes the restarted node's wait for readiness and the
// cluster's catching up afterwards, not only what is left once Run
// returns (which was always about 0: the restart had waited for
// readiness). Only lower bounds are asserted, which load cannot break.
func TestConvergenceCountsFromTheLift(t *testing.T) {
	const ready = 300 * time.Millisecond
	f := &slowRestart{ready: ready}
	lifted, err := Run(context.Background(), []Step{{At: 0, Kind: Kill, Node: 2, For: time.Millisecond}}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Since(lifted); got < ready {
		t.Fatalf("Run returned %v after the lift, before the node could have been ready (%v): the lift is not the restart's start", got, ready)
	}
	// Two polls 200 ms apart find the range short of a voter.
	dir := &recoveringDir{behind: 2}
	took, err := awaitReplicated(context.Background(), dir, lifted, time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := ready + 2*200*time.Millisecond; took < want || dir.polls != 3 {
		t.Fatalf("converged %v after the lift in %d polls, want at least %v (readiness %v and two polls) in 3", took, dir.polls, want, ready)
	}
}

// A schedule passes by its workload's check: linearizable, no anomaly,
// or, with a break, anomalies found; a break without transactions is
// refused.
func TestReportPassedByWorkload(t *testing.T) {
	for _, c := range []struct {
		r    Report
		want bool
	}{
		{Report{Workload: "kv", Linearizable: true}, true},
		{Report{Workload: "kv"}, false},
		{Report{Workload: "txn"}, true},
		{Report{Workload: "txn", Anomalies: 1}, false},
		{Report{Workload: "txn", Break: "skip-refresh", Anomalies: 1}, true},
		{Report{Workload: "txn", Break: "skip-refresh"}, false},
		{Report{Workload: "txn-resp"}, true},
		{Report{Workload: "txn-resp", Anomalies: 2}, false},
		{Report{Workload: "txn-resp", Break: "skip-refresh", Anomalies: 2}, true},
	} {
		c.r.Converged = true
		if got := c.r.Passed(); got != c.want {
			t.Errorf("%+v passed %v, want %v", c.r, got, c.want)
		}
	}
	c := DefaultChaosConfig()
	c.Binary, c.Break = "tidekv", "skip-refresh"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "needs the txn or txn-resp workload") {
		t.Errorf("a break with the kv workload: %v", err)
	}
}
