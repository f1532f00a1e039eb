package elastic

import (
	"math"
	"time"
)

// Sample is one node's foreground over one round.
type Sample struct {
	// Ops is what it served per second and Rejected what it refused as
	// overloaded; Utilization its busy share in [0,1] (CPU), or 0 when
	// unknown, in which case it is inferred from P99 against the idle p99.
	Ops         float64
	Rejected    float64
	Utilization float64
	P99         time.Duration
}

// CapacityModel learns, per node, the throughput at full utilisation
// (ops/s ÷ utilisation, smoothed) and from it the throughput at the SLO.
// Latency follows an open queue's tail, p99 ≈ idle/(1−u), so the SLO is
// met up to u = 1 − idle/SLO. A node that delivers less per unit of
// utilisation than its best peer suffers interference (a co-runner
// steals its CPU or disk): its factor is the ratio.
type CapacityModel struct {
	prior   float64       // ops/s at full utilisation before any sample
	idle    time.Duration // p99 of a lightly loaded node
	learned map[uint64]float64
}

// Learning thresholds: below minUtilization a node's samples say little
// about its capacity (fixed costs dominate); idle p99s are learned only
// below idleUtilization.
const (
	capacityAlpha   = 0.2
	minUtilization  = 0.25
	idleUtilization = 0.15
	idleAlpha       = 0.05
)

// NewCapacityModel starts from a node capacity prior and an idle p99.
func NewCapacityModel(prior float64, idle time.Duration) *CapacityModel {
	return &CapacityModel{prior: prior, idle: idle, learned: map[uint64]float64{}}
}

// Observe learns from one round's samples, by node. Nodes not in live
// are forgotten (they left); a live node without a sample keeps what was
// learned of it. Nodes moving data have no sample: forgetting them
// counted each at the best node's capacity (or the prior) for as long as
// a move lasted, so capacity rose when a drain began and fell when it
// stopped, and the planner drained and recommissioned the same node
// round after round.
func (m *CapacityModel) Observe(samples map[uint64]Sample, live []uint64) {
	keep := make(map[uint64]bool, len(live))
	for _, id := range live {
		keep[id] = true
	}
	for id := range m.learned {
		if !keep[id] {
			delete(m.learned, id)
		}
	}
	for id, s := range samples {
		u := s.Utilization
		if u <= 0 && s.P99 > 0 {
			u = 1 - float64(m.idle)/float64(s.P99)
		}
		if u > 0 && u < idleUtilization && s.P99 > 0 {
			m.idle = time.Duration(idleAlpha*float64(s.P99) + (1-idleAlpha)*float64(m.idle))
		}
		if u < minUtilization || s.Ops <= 0 {
			continue
		}
		c := s.Ops / math.Min(u, 1)
		if old, ok := m.learned[id]; ok {
			c = capacityAlpha*c + (1-capacityAlpha)*old
		}
		m.learned[id] = c
	}
}

// Nominal is a node's capacity without interference (ops/s at full
// utilisation): the best learned capacity, or the prior.
func (m *CapacityModel) Nominal() float64 {
	best := 0.0
	for _, c := range m.learned {
		best = math.Max(best, c)
	}
	if best == 0 {
		return m.prior
	}
	return best
}

// Interference is node id's factor in (0,1]: its capacity over the
// nominal one (1 until it has been learned).
func (m *CapacityModel) Interference(id uint64) float64 {
	c, ok := m.learned[id]
	if !ok {
		return 1
	}
	return math.Max(0.05, math.Min(1, c/m.Nominal()))
}

// UtilizationAtSLO is the busy share at which p99 reaches slo, in
// [0.05, 0.95].
func (m *CapacityModel) UtilizationAtSLO(slo time.Duration) float64 {
	return math.Max(0.05, math.Min(0.95, 1-float64(m.idle)/float64(slo)))
}

// AtSLO is node id's throughput at the SLO (ops/s): its own learned
// capacity with interference, the nominal one without.
func (m *CapacityModel) AtSLO(id uint64, slo time.Duration, interference bool) float64 {
	c := m.Nominal()
	if interference {
		c *= m.Interference(id)
	}
	return c * m.UtilizationAtSLO(slo)
}

// Measured is each node's throughput at the SLO with interference (AtSLO)
// for the nodes learned so far: nodes without enough load to measure are absent rather
// than counted at the nominal capacity.
func (m *CapacityModel) Measured(slo time.Duration) map[uint64]float64 {
	out := make(map[uint64]float64, len(m.learned))
	for id := range m.learned {
		out[id] = m.AtSLO(id, slo, true)
	}
	return out
}

// IdleP99 is the learned p99 of a lightly loaded node.
func (m *CapacityModel) IdleP99() time.Duration { return m.idle }
