package placement

import (
	"strings"
	"testing"
)

func TestFollowTheWriters(t *testing.T) {
	replicas := []LeaseCandidate{
		{Node: 1, Locality: "region=a", Voter: true, Live: true, Score: 3},
		{Node: 2, Locality: "region=b", Voter: true, Live: true, Score: 5},
		{Node: 3, Locality: "region=b", Voter: true, Live: true, Score: 4},
		{Node: 4, Locality: "region=c", Voter: false, Live: true, Score: 1},
		{Node: 5, Locality: "region=d", Voter: true, Live: false, Score: 1},
	}
	cfg := DefaultLeaseConfig()
	for _, tc := range []struct {
		name   string
		writes map[string]float64
		want   uint64 // 0: stay
		reason string
	}{
		{"too few writes", map[string]float64{"region=b": 9}, 0, ""},
		{"writers already local", map[string]float64{"region=a": 500, "region=b": 10}, 0, ""},
		{"b dominates: least-loaded voter there", map[string]float64{"region=a": 100, "region=b": 400}, 3, "80% of 500 writes/s came from region=b (leaseholder's region=a: 100/s)"},
		{"not dominant enough", map[string]float64{"region=a": 45, "region=b": 55}, 0, ""},
		{"dominant but within hysteresis", map[string]float64{"region=a": 350, "region=b": 650}, 0, ""},
		{"only a learner there", map[string]float64{"region=c": 1000}, 0, ""},
		{"only a dead voter there", map[string]float64{"region=d": 1000}, 0, ""},
		{"unknown origins do not count as a locality", map[string]float64{"": 1000, "region=b": 10}, 0, ""},
	} {
		d, ok := FollowTheWriters(LeaseInput{Leaseholder: 1, Replicas: replicas, Writes: tc.writes}, cfg)
		if (tc.want != 0) != ok || d.Target != tc.want {
			t.Errorf("%s: got %+v ok=%v, want target %d", tc.name, d, ok, tc.want)
		}
		if ok && !strings.Contains(d.Reason, tc.reason) {
			t.Errorf("%s: reason %q, want %q", tc.name, d.Reason, tc.reason)
		}
	}
}

// Once moved, the lease stays: the same writes seen from the new
// leaseholder's locality give no reason to move again.
func TestFollowTheWritersDoesNotBounce(t *testing.T) {
	replicas := []LeaseCandidate{
		{Node: 1, Locality: "a", Voter: true, Live: true},
		{Node: 2, Locality: "b", Voter: true, Live: true},
	}
	writes := map[string]float64{"a": 300, "b": 700}
	d, ok := FollowTheWriters(LeaseInput{Leaseholder: 1, Replicas: replicas, Writes: writes}, DefaultLeaseConfig())
	if !ok || d.Target != 2 {
		t.Fatalf("first move: %+v %v", d, ok)
	}
	if d, ok := FollowTheWriters(LeaseInput{Leaseholder: 2, Replicas: replicas, Writes: writes}, DefaultLeaseConfig()); ok {
		t.Fatalf("moved back: %+v", d)
	}
}

func TestLeaseConfigValidate(t *testing.T) {
	if err := DefaultLeaseConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []LeaseConfig{{Dominance: 0, Hysteresis: 1}, {Dominance: 1.5, Hysteresis: 1}, {Dominance: 0.5, Hysteresis: 0.5}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
