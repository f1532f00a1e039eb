package placement

import (
	"math"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func TestIndex(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		want   float64
	}{
		{nil, 0},
		{[]float64{5}, 0},
		{[]float64{3, 3, 3}, 0},
		{[]float64{0, 0}, 0},
		{[]float64{2, 4}, 1.0 / 3},             // mean 3, stddev 1
		{[]float64{0, 0, 0, 12}, math.Sqrt(3)}, // mean 3, stddev sqrt(27)
	} {
		if got := Index(tc.values); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Index(%v) = %v, want %v", tc.values, got, tc.want)
		}
	}
}

func TestImbalanceIgnoresDeadNodes(t *testing.T) {
	nodes := []*tidekvpb.NodeStatus{
		{Live: true, Replicas: 10, Bytes: 100, Qps: 50, Cpu: 0.5},
		{Live: true, Replicas: 10, Bytes: 300, Qps: 150, Cpu: 0.5},
		{Live: false, Replicas: 90, Bytes: 9000, Qps: 0, Cpu: 0},
	}
	im := ImbalanceOf(nodes)
	if im.GetReplicas() != 0 || im.GetCpu() != 0 {
		t.Fatalf("even dimensions not 0: %v", im)
	}
	if math.Abs(im.GetBytes()-0.5) > 1e-12 || math.Abs(im.GetQps()-0.5) > 1e-12 {
		t.Fatalf("bytes/qps index: %v, want 0.5 each", im)
	}
}
