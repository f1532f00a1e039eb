package nemesis

import (
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
	if _, _, err := chaosTLS(dir); err == nil || !strings.Contains(err.Error(), "no client.root.crt") {
		t.Errorf("certs dir without root's certificate: %v", err)
	}
}
