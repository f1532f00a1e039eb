package placement

import (
	"math"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// Index is the imbalance index of per-node values: population standard
// deviation over mean. 0 means perfectly even; it is 0 too when there are
// fewer than two values or the mean is 0 (nothing to balance).
func Index(values []float64) float64 {
	if len(values) < 2 {
		return 0
	}
	var sum float64
	for _, v := range values {
		sum += v
	}
	mean := sum / float64(len(values))
	if mean == 0 {
		return 0
	}
	var sq float64
	for _, v := range values {
		sq += (v - mean) * (v - mean)
	}
	return math.Sqrt(sq/float64(len(values))) / mean
}

// ImbalanceOf computes the indices over the live nodes: a dead node's last
// numbers say nothing about how load is spread now.
func ImbalanceOf(nodes []*tidekvpb.NodeStatus) *tidekvpb.Imbalance {
	var replicas, bytes, qps, cpu []float64
	for _, n := range nodes {
		if !n.GetLive() {
			continue
		}
		replicas = append(replicas, float64(n.GetReplicas()))
		bytes = append(bytes, float64(n.GetBytes()))
		qps = append(qps, n.GetQps())
		cpu = append(cpu, n.GetCpu())
	}
	return &tidekvpb.Imbalance{Replicas: Index(replicas), Bytes: Index(bytes), Qps: Index(qps), Cpu: Index(cpu)}
}
