package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// The foreground model is deliberately not the one the elasticity
// controller's capacity model assumes (internal/elastic/capacity.go:
// p99 = idle/(1−u), every node at the policy's capacity prior). A node is
// an M/M/c queue with c = Workers, its tail flat until utilisation is high
// and then steep; its true capacity is drawn per node and drifts; what it
// reports is noisy. The controller has to learn the cluster, not read back
// its own formula.

// Drift and noise settings shared by every node: the drift reverts to the
// node's drawn factor with this time constant, its stationary standard
// deviation is half the node's Drift.
const driftTime = 5 * time.Minute

// tailQuantile is the share of requests slower than the reported p99.
const tailQuantile = 0.01

// newNode builds node id with its true capacity factor drawn from the
// foreground source.
func (s *Sim) newNode(id uint64, spec NodeSpec) *node {
	spec = spec.withDefaults()
	f := 1 + spec.Spread*(2*s.fg.Float64()-1)
	n := &node{id: id, spec: spec, base: f, factor: f, cpuRead: 1, p99Read: 1}
	n.capacity = spec.Capacity * f
	return n
}

// newForegroundSource is the foreground model's random source: apart from
// the placement model's, so capacities and readings do not shift its
// elections or key orders.
func newForegroundSource(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed^0x2545f4914f6cdd1d, seed))
}

// driftAndSample moves each node's true capacity along its drift
// (an Ornstein–Uhlenbeck walk around its drawn factor, kept within
// ±Drift of it) and draws this tick's reading errors.
func (s *Sim) driftAndSample(dt time.Duration) {
	k := dt.Seconds() / driftTime.Seconds()
	for _, n := range s.nodes {
		if n.gone {
			continue
		}
		if d := n.spec.Drift; d > 0 {
			sigma := d / 2 * math.Sqrt(2*k)
			n.factor += k*(n.base-n.factor) + sigma*s.fg.NormFloat64()
			n.factor = math.Max(n.base-d, math.Min(n.base+d, n.factor))
			n.capacity = n.spec.Capacity * n.factor
		}
		n.cpuRead, n.p99Read = 1, 1
		if e := n.spec.Noise; e > 0 {
			n.cpuRead = math.Max(0, 1+e*s.fg.NormFloat64())
			n.p99Read = math.Max(0.1, 1+e*s.fg.NormFloat64())
		}
	}
}

// foreground derives a node's utilisation, what it serves and refuses, and
// its p99. Migration traffic and a co-located hog take capacity; beyond
// capacity the excess is refused (bounded queues) and p99 is the queue's
// at 99% utilisation.
func (s *Sim) foreground(n *node) {
	capacity := n.capacity * (1 - n.spec.Steal)
	migration := n.io * n.spec.DiskBandwidth / (1 << 20) * n.spec.MigrationCost * n.capacity
	n.util = (n.load + migration) / capacity
	n.served, n.rejected = n.load, 0
	if n.util > 1 {
		n.served = math.Max(0, capacity-migration)
		n.rejected = n.load - n.served
	}
	n.p99 = sojournQuantile(n.spec.Workers, capacity, math.Min(n.util, 0.99))
}

// sojournQuantile is the time within which all but tailQuantile of the
// requests are answered by an M/M/c queue of c workers serving capacity
// requests/s together, at utilisation u in [0, 1): the wait W is 0 with
// probability 1−C (Erlang C) and otherwise exponential at rate θ = cμ−λ,
// the service S exponential at rate μ, so
// P(W+S > t) = (1−C)·e^{−μt} + C·(θe^{−μt} − μe^{−θt})/(θ−μ),
// solved for t by bisection.
func sojournQuantile(c int, capacity, u float64) time.Duration {
	mu := capacity / float64(c)
	theta := capacity * (1 - u)
	erlangC := erlangC(c, float64(c)*u)
	tail := func(t float64) float64 {
		s := math.Exp(-mu * t)
		var both float64
		if math.Abs(theta-mu) < 1e-9*mu {
			both = (1 + mu*t) * s // W and S at one rate: Erlang-2
		} else {
			both = (theta*s - mu*math.Exp(-theta*t)) / (theta - mu)
		}
		return (1-erlangC)*s + erlangC*both
	}
	lo, hi := 0.0, 1/mu
	for tail(hi) > tailQuantile {
		lo, hi = hi, 2*hi
	}
	for range 50 {
		if mid := (lo + hi) / 2; tail(mid) > tailQuantile {
			lo = mid
		} else {
			hi = mid
		}
	}
	return time.Duration(hi * float64(time.Second))
}

// erlangC is the probability that a request waits in an M/M/c queue with
// offered load a = λ/μ (a < c), from the Erlang B recursion.
func erlangC(c int, a float64) float64 {
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	rho := a / float64(c)
	return b / (1 - rho*(1-b))
}
