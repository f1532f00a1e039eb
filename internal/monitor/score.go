package monitor

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxUtilisation is where Score clamps every utilisation. At u=1 the term
// w/(1-u) would be infinite; 0.99 caps a saturated resource at 100·w, large
// enough to dominate any lightly loaded node yet finite so that two saturated
// nodes still compare on their other terms.
const MaxUtilisation = 0.99

// Usage is one measurement of a node's load. It is a plain value: copying it
// is cheap and it is never mutated once published.
type Usage struct {
	// CPU is the machine-wide busy fraction of all CPUs since the previous
	// sample, in [0,1]. Time in iowait counts as idle.
	CPU float64
	// ProcessCPU is this process's share of all the machine's CPU time
	// over the same interval, in [0,1]; meaningful when ProcessKnown.
	ProcessCPU   float64
	ProcessKnown bool
	// MachineCPUs is the number of CPUs /proc/stat counts.
	MachineCPUs int
	// Quota is the node's CPU size and throttling as last read (zero when
	// the node is not sized); ThrottledShare is the share of the quota's
	// periods since the previous sample in which the node used it all.
	Quota          CPUQuota
	ThrottledShare float64
	// GroupCPUs is the CPUs the node's cgroup used since the previous
	// sample: the node's own and whatever else runs in it (a co-runner);
	// meaningful when GroupKnown (the cgroup's usage is read: see
	// CPUQuota.Usage).
	GroupCPUs  float64
	GroupKnown bool
	// Memory is 1 - MemAvailable/MemTotal, in [0,1]: the share of RAM the
	// kernel could not hand out without swapping (reclaimable page cache
	// counts as available).
	Memory float64
	// DiskIO is the busiest physical disk's busy-time fraction since the
	// previous sample (iostat's %util), in [0,1].
	DiskIO float64
	// QueueDepth is the number of requests waiting or in service.
	QueueDepth int
	// QueueLimit bounds QueueDepth (admission limit); 0 means unbounded or
	// unknown and makes the queue term contribute only its weight.
	QueueLimit int
	// ServiceTime is the recent mean time to serve one request.
	ServiceTime time.Duration
	// SampledAt is when the sample was taken (injected clock).
	SampledAt time.Time
}

// OtherLoadWeight is how much of the machine's CPU use by other processes
// counts in a node's own CPU utilisation: they slow it (shared cores), but
// less than its own work, and nodes sharing a machine must differ when one
// of them is the loaded one.
const OtherLoadWeight = 0.5

// NodeCPU is the CPU utilisation that stands for this node. A sized node
// (Quota.CPUs) has CPUs of its own, so it is the utilisation of what its
// quota leaves it: SizedCPU where its cgroup's usage is known; where it is
// not, the CPUs it used over its quota, or the share of periods in which
// it was throttled where that is higher (the only sign left that something
// else in its cgroup, a co-runner, used the quota). An unsized node shares
// the machine: its own share of the machine plus OtherLoadWeight of
// everyone else's; alone on its machine it gets the machine's figure.
// Without a process reading, the machine's.
func (u Usage) NodeCPU() float64 {
	if !u.ProcessKnown {
		return u.CPU
	}
	if u.Quota.CPUs > 0 && u.MachineCPUs > 0 {
		own := u.ProcessCPU * float64(u.MachineCPUs)
		if u.GroupKnown {
			return SizedCPU(own, u.GroupCPUs, u.Quota.CPUs)
		}
		return min(1, max(own/u.Quota.CPUs, u.ThrottledShare))
	}
	return min(1, u.ProcessCPU+OtherLoadWeight*max(0, u.CPU-u.ProcessCPU))
}

// MinLeftShare is the least share of its quota a sized node is taken to
// have left, however much its cgroup's other processes used: the node's
// own CPU and its cgroup's usage are read a moment apart and from counters
// of different resolution (ticks, nanoseconds), so the others' use can
// read as the whole quota while the node runs.
const MinLeftShare = 0.05

// SizedCPU is the utilisation of a sized node that used own CPUs while its
// cgroup, with a quota of quota CPUs, used group CPUs in all (own
// included): own over the CPU the rest of the cgroup (a co-runner) left
// it, quota − (group − own), at least MinLeftShare of the quota; in
// [0, 1]. A node that serves n requests/s at utilisation u can serve about
// n/u, which is its capacity less what the co-runner takes: the capacity
// model (internal/elastic) learns that. The share of throttled periods
// does not enter: the cgroup is throttled when the node and its
// co-runner together use the quota, so it counts the co-runner's use,
// which the usage now measures, and turns a burst within a 10 ms period
// into a saturated period, where the model wants the interval's mean.
func SizedCPU(own, group, quota float64) float64 {
	others := max(0, group-own)
	left := max(MinLeftShare*quota, quota-others)
	return min(1, max(0, own/left))
}

// QueueOccupancy is QueueDepth/QueueLimit as a utilisation, 0 when the
// limit is not positive.
func (u Usage) QueueOccupancy() float64 {
	if u.QueueLimit <= 0 || u.QueueDepth <= 0 {
		return 0
	}
	return float64(u.QueueDepth) / float64(u.QueueLimit)
}

// Weights set how much each term contributes to Score. All fields must be
// finite and non-negative, and at least one positive. A zero weight removes
// its term.
type Weights struct {
	// CPU scales the CPU term CPU/(1-u_cpu). Dimensionless: it is the
	// term's value on an idle machine.
	CPU float64
	// Memory scales the memory term Memory/(1-u_mem). Dimensionless.
	// Memory pressure hurts latency mostly through cache loss and reclaim,
	// late and indirectly, so the default is below CPU.
	Memory float64
	// DiskIO scales the disk term DiskIO/(1-u_disk). Dimensionless. Reads
	// that miss the block cache wait on the disk, so the default is above CPU.
	DiskIO float64
	// Queue scales the queue term Queue/(1-depth/limit). Dimensionless. It
	// is the most direct signal that requests will wait or be rejected.
	Queue float64
	// ServiceTime is score points per millisecond of Usage.ServiceTime. It
	// is the observed (lagging) cost of a request on this node.
	ServiceTime float64
	// RTT is score points per millisecond of network round trip between
	// the chooser and this node; it makes far replicas pay for distance.
	RTT float64
}

// DefaultWeights returns the weights used when nothing is configured. With
// them an idle node scores 4 (the sum of the utilisation weights), a CPU at
// 50% adds 1, at 90% adds 9, and each millisecond of round trip or service
// time adds 1: a replica one region away (~50 ms) loses to a local one unless
// the local node is close to saturation.
func DefaultWeights() Weights {
	return Weights{
		CPU:         1.0,
		Memory:      0.5,
		DiskIO:      1.5,
		Queue:       1.0,
		ServiceTime: 1.0,
		RTT:         1.0,
	}
}

// Validate reports whether the weights can produce a meaningful score.
func (w Weights) Validate() error {
	fields := []struct {
		name string
		v    float64
	}{
		{"CPU", w.CPU}, {"Memory", w.Memory}, {"DiskIO", w.DiskIO},
		{"Queue", w.Queue}, {"ServiceTime", w.ServiceTime}, {"RTT", w.RTT},
	}
	var errs []error
	positive := false
	for _, f := range fields {
		switch {
		case math.IsNaN(f.v) || math.IsInf(f.v, 0):
			errs = append(errs, fmt.Errorf("monitor: weight %s is %v, want a finite number", f.name, f.v))
		case f.v < 0:
			errs = append(errs, fmt.Errorf("monitor: weight %s is %v, want >= 0", f.name, f.v))
		case f.v > 0:
			positive = true
		}
	}
	if !positive && len(errs) == 0 {
		errs = append(errs, errors.New("monitor: all weights are zero, want at least one positive"))
	}
	return errors.Join(errs...)
}

// Score condenses a node's usage and the round trip to it into one number;
// lower means the node is expected to serve a request sooner.
//
//	Score = Wcpu/(1-cpu) + Wmem/(1-mem) + Wdisk/(1-disk) + Wq/(1-depth/limit)
//	      + Wsvc·(serviceTime/1ms) + Wrtt·(rtt/1ms)
//
// cpu is NodeCPU: the utilisation of a sized node's quota, or an unsized
// node's own CPU use with the machine's as context.
// Each utilisation is clamped to [0, MaxUtilisation] (NaN counts as 0), so
// the score is finite even for a saturated resource. The 1/(1-u) form is the
// slow-down of a single-server queue at utilisation u: it grows slowly while
// a resource has headroom and steeply as it saturates. The terms are summed
// because a request's waits at successive resources add up; the last two
// terms are already times and enter linearly. Negative durations count as 0.
//
// Score is pure: it reads no clock and no shared state, so it is safe on
// any goroutine and equal inputs give equal scores. It is additive in rtt,
// so a chooser can add Wrtt·rtt/1ms to a Snapshot.Score computed with rtt=0.
func Score(u Usage, rtt time.Duration, w Weights) float64 {
	return w.CPU/(1-clampUtil(u.NodeCPU())) +
		w.Memory/(1-clampUtil(u.Memory)) +
		w.DiskIO/(1-clampUtil(u.DiskIO)) +
		w.Queue/(1-clampUtil(u.QueueOccupancy())) +
		w.ServiceTime*millis(u.ServiceTime) +
		w.RTT*millis(rtt)
}

func clampUtil(u float64) float64 {
	if !(u > 0) { // also catches NaN
		return 0
	}
	return min(u, MaxUtilisation)
}

func millis(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(d) / float64(time.Millisecond)
}
