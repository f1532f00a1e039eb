package sim

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/placement"
)

// Options are the simulator's own settings: its time step, the model's
// timings, and the control loop's configuration (the same
// control.Config the server reads: interval, dead-node grace, the
// runner's limits and migration rate). Zero fields take the defaults of
// DefaultOptions, field by field inside Control too; for
// SnapshotOverhead, MergeDuration, FollowerWriteCost and ReportEvery a
// negative value means zero.
type Options struct {
	// Seed seeds the PCG source (elections, scrambled key orders).
	Seed uint64
	// Tick is the model's time step.
	Tick time.Duration
	// Control is the control loop's configuration: rounds every
	// Control.Interval; a killed node is dead after Control.DeadNodeGrace;
	// Control.Runner.MigrationRate (bytes/s) caps a node's snapshot
	// traffic, sent or received, shared by its concurrent snapshots.
	Control control.Config
	// SnapshotOverhead is the catch-up and promotion after a snapshot's
	// data (also the whole cost of promoting a learner); MergeDuration a
	// merge's. Lease transfers, removals and splits take no time.
	SnapshotOverhead, MergeDuration time.Duration
	// ThrashWindow: a replica returning to a node it left, or a lease
	// going back to the node it came from, within this window is thrash.
	ThrashWindow time.Duration
	// FollowerWriteCost is what a write costs a replica that is not the
	// leaseholder, relative to the leaseholder (log append and apply).
	FollowerWriteCost float64
	// ReportEvery is how often a node samples and reports the load of the
	// ranges it leads (the server's ReportInterval); the policy sees only
	// these reports (report.go). Negative: the true rates at once.
	ReportEvery time.Duration
	// RequestsOnly: a node reports as served (control.NodeSignal.Ops) only
	// the clients' requests it answers, as the server's do, not the
	// writes it applies as a follower. Off (the elastic benchmarks' model,
	// measured against it in docs/benchmarks/elasticity.md), follower
	// work counts as requests, so the capacity model reads every node's
	// requests over CPU as its capacity and cannot see a node whose CPU
	// goes to following (issue 34).
	RequestsOnly bool
}

// DefaultOptions: 1 s ticks, control.DefaultConfig() (what the server
// runs with), 1 s of snapshot overhead, 2 s merges.
func DefaultOptions() Options {
	return Options{
		Seed:              1,
		Tick:              time.Second,
		Control:           control.DefaultConfig(),
		SnapshotOverhead:  time.Second,
		MergeDuration:     2 * time.Second,
		ThrashWindow:      10 * time.Minute,
		FollowerWriteCost: 0.3,
		ReportEvery:       3 * time.Second,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Seed == 0 {
		o.Seed = d.Seed
	}
	if o.Tick <= 0 {
		o.Tick = d.Tick
	}
	o.Control = controlDefaults(o.Control, d.Control)
	o.SnapshotOverhead = orDefault(o.SnapshotOverhead, d.SnapshotOverhead)
	o.MergeDuration = orDefault(o.MergeDuration, d.MergeDuration)
	if o.ThrashWindow <= 0 {
		o.ThrashWindow = d.ThrashWindow
	}
	o.FollowerWriteCost = orDefault(o.FollowerWriteCost, d.FollowerWriteCost)
	o.ReportEvery = orDefault(o.ReportEvery, d.ReportEvery)
	return o
}

// controlDefaults fills c's zero fields from d.
func controlDefaults(c, d control.Config) control.Config {
	pos := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pos(&c.Interval, d.Interval)
	pos(&c.DeadNodeGrace, d.DeadNodeGrace)
	pos(&c.NoteEvery, d.NoteEvery)
	pos(&c.StateEvery, d.StateEvery)
	pos(&c.Runner.OpTimeout, d.Runner.OpTimeout)
	pos(&c.Runner.RecentWindow, d.Runner.RecentWindow)
	r, dr := &c.Runner, d.Runner
	if r.MaxInFlight <= 0 {
		r.MaxInFlight = dr.MaxInFlight
	}
	if r.MaxSnapshotsPerNode <= 0 {
		r.MaxSnapshotsPerNode = dr.MaxSnapshotsPerNode
	}
	if r.OpsPerMinute <= 0 {
		r.OpsPerMinute = dr.OpsPerMinute
	}
	if r.MigrationRate <= 0 {
		r.MigrationRate = dr.MigrationRate
	}
	return c
}

// orDefault: zero takes the default, a negative value means zero.
func orDefault[T time.Duration | float64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// NodeSpec describes a node's hardware and place.
type NodeSpec struct {
	Locality string
	// Capacity is the requests per second at which its CPU is saturated
	// (before Spread and Drift).
	Capacity float64
	// Workers is how many requests it serves at once: its foreground is
	// an M/M/c queue with c = Workers, each worker serving Capacity/Workers
	// requests/s (foreground.go).
	Workers int
	// Spread and Drift make its true capacity differ from Capacity: a
	// factor drawn once, uniform in [1−Spread, 1+Spread], around which it
	// then wanders by up to ±Drift. Noise is the relative standard
	// deviation of its CPU and p99 readings, drawn each tick (the model's
	// metrics use the true values). All three 0: exactly Capacity, exact
	// readings.
	Spread, Drift, Noise float64
	// DiskBandwidth (bytes/s) caps its snapshot traffic together with the
	// migration bandwidth, and is the denominator of its disk utilisation.
	DiskBandwidth float64
	// Steal is the share of its capacity a co-located process takes (a CPU
	// hog beside it): 0 for a node alone.
	Steal float64
	// MigrationCost is the share of its capacity that each MiB/s of
	// snapshot traffic, sent or received, costs (0: free, the placement
	// scenarios' default).
	MigrationCost float64
}

// DefaultNodeSpec: 10000 qps over 4 workers (an idle p99 of 1.8 ms),
// 256 MiB/s of disk.
func DefaultNodeSpec() NodeSpec {
	return NodeSpec{Capacity: 10000, Workers: 4, DiskBandwidth: 256 << 20}
}

func (n NodeSpec) withDefaults() NodeSpec {
	d := DefaultNodeSpec()
	if n.Capacity <= 0 {
		n.Capacity = d.Capacity
	}
	if n.Workers <= 0 {
		n.Workers = d.Workers
	}
	if n.DiskBandwidth <= 0 {
		n.DiskBandwidth = d.DiskBandwidth
	}
	return n
}

// ClusterSpec is the cluster a simulation starts with.
type ClusterSpec struct {
	// Nodes are numbered from 1; Localities, when given, are assigned
	// round-robin.
	Nodes      int
	Localities []string
	Node       NodeSpec
	// Ranges split the key space evenly; range i's RF voters go on nodes
	// i, i+1, … (mod Nodes), the first holding the lease.
	Ranges        int
	RF            int
	BytesPerRange uint64
}

type node struct {
	id    uint64
	spec  NodeSpec
	state placement.NodeState
	// killedAt is when it went suspect; gone when a drained node left.
	killedAt time.Time
	gone     bool
	// clockUntrusted: its clock is too far from its peers' to hold leases.
	clockUntrusted bool

	// capacity is its true capacity now: spec.Capacity × factor, which
	// drifts around base (foreground.go). cpuRead and p99Read are this
	// tick's reading errors (factors on what it reports).
	base, factor, capacity float64
	cpuRead, p99Read       float64

	// Derived each tick. load is its work (requests it answers, and the
	// writes it applies as a follower at FollowerWriteCost each), requests
	// the clients' requests it answers; util is the foreground and
	// migration demand over the capacity left by Steal; served and
	// rejected split load at capacity; p99 is the foreground latency it
	// causes.
	load, requests, cpu    float64
	io, score              float64
	util, served, rejected float64
	p99                    time.Duration
	replicas, leases       int
	bytes                  float64
}

func (n *node) up() bool {
	return !n.gone && (n.state == placement.NodeLive || n.state == placement.NodeDraining)
}

type rangeState struct {
	id         uint64
	start, end []byte
	lo, hi     int // modeled key indices [lo, hi)
	replicas   []placement.Replica
	lease      uint64
	bytes      float64
	qps, reads float64
	hotShare   float64
	splitAt    time.Time
}

func (r *rangeState) has(n uint64) (placement.Replica, bool) {
	for _, rep := range r.replicas {
		if rep.Node == n {
			return rep, true
		}
	}
	return placement.Replica{}, false
}

func (r *rangeState) voters() []uint64 {
	var out []uint64
	for _, rep := range r.replicas {
		if rep.Type == placement.Voter {
			out = append(out, rep.Node)
		}
	}
	return out
}

func (r *rangeState) remove(n uint64) {
	r.replicas = slices.DeleteFunc(r.replicas, func(rep placement.Replica) bool { return rep.Node == n })
}

func (r *rangeState) String() string {
	return fmt.Sprintf("r%d[%s,%s)", r.id, keyString(r.start), keyString(r.end))
}

func keyString(k []byte) string {
	if len(k) == 0 {
		return "-"
	}
	return string(k)
}

// newCluster builds the initial nodes and ranges.
func (s *Sim) newCluster(c ClusterSpec) error {
	if c.Nodes < 1 || c.Ranges < 1 || c.RF < 1 {
		return fmt.Errorf("sim: need at least one node, one range and rf ≥ 1, got nodes=%d ranges=%d rf=%d", c.Nodes, c.Ranges, c.RF)
	}
	if c.Ranges > s.workload.Keys {
		return fmt.Errorf("sim: %d ranges over %d keys", c.Ranges, s.workload.Keys)
	}
	for i := 0; i < c.Nodes; i++ {
		spec := c.Node
		if len(c.Localities) > 0 {
			spec.Locality = c.Localities[i%len(c.Localities)]
		}
		s.nodes = append(s.nodes, s.newNode(uint64(i+1), spec))
	}
	n := s.workload.Keys
	for i := 0; i < c.Ranges; i++ {
		r := &rangeState{id: s.nextRangeID(), bytes: float64(c.BytesPerRange)}
		if i > 0 {
			r.start = Key(i * n / c.Ranges)
		}
		if i+1 < c.Ranges {
			r.end = Key((i + 1) * n / c.Ranges)
		}
		for j := 0; j < min(c.RF, c.Nodes); j++ {
			r.replicas = append(r.replicas, placement.Replica{Node: uint64((i+j)%c.Nodes + 1), Type: placement.Voter})
		}
		r.lease = r.replicas[0].Node
		s.addRange(r)
	}
	return nil
}

func (s *Sim) nextRangeID() uint64 {
	s.lastRangeID++
	return s.lastRangeID
}

// addRange inserts r in key order.
func (s *Sim) addRange(r *rangeState) {
	r.lo, r.hi = bounds(r.start, r.end, s.workload.Keys)
	i, _ := slices.BinarySearchFunc(s.ranges, r, func(a, b *rangeState) int { return compareStart(a.start, b.start) })
	s.ranges = slices.Insert(s.ranges, i, r)
	s.byID[r.id] = r
}

func (s *Sim) dropRange(r *rangeState) {
	s.ranges = slices.DeleteFunc(s.ranges, func(x *rangeState) bool { return x == r })
	delete(s.byID, r.id)
}

// compareStart orders start keys, nil (the beginning) first.
func compareStart(a, b []byte) int { return bytes.Compare(a, b) }

func (s *Sim) node(id uint64) *node {
	i, ok := slices.BinarySearchFunc(s.nodes, id, func(n *node, id uint64) int {
		switch {
		case n.id < id:
			return -1
		case n.id > id:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return s.nodes[i]
}

// up reports whether node id serves (live or draining).
func (s *Sim) up(id uint64) bool {
	n := s.node(id)
	return n != nil && n.up()
}

// applyWorkload gives each range its requests for this tick, grows its
// data by dt of writes.
func (s *Sim) applyWorkload(dt time.Duration) {
	w := s.workload
	for _, r := range s.ranges {
		share := s.dist.share(r.lo, r.hi)
		r.qps = w.QPS * share
		r.reads = r.qps * w.ReadShare
		r.hotShare = 0
		if share > 0 {
			r.hotShare = math.Min(1, s.dist.hottest(r.lo, r.hi)/share)
		}
		r.bytes += w.GrowthBytesPerSec * dt.Seconds() * share
	}
	s.observeLoad(dt)
}

// refreshRanges recomputes a range's requests without time passing (after
// a split, merge or workload change).
func (s *Sim) refreshRanges() { s.applyWorkload(0) }

// computeLoads derives each node's replicas, leases, bytes, load, CPU and
// score from the ranges: the leaseholder serves writes and the reads only
// it may serve; reads any replica may serve spread over the live replicas;
// every other live replica pays FollowerWriteCost per write.
func (s *Sim) computeLoads() {
	for _, n := range s.nodes {
		n.load, n.requests, n.replicas, n.leases, n.bytes = 0, 0, 0, 0, 0
	}
	w := s.workload
	for _, r := range s.ranges {
		var live []*node
		for _, rep := range r.replicas {
			n := s.node(rep.Node)
			if n == nil {
				continue
			}
			n.replicas++
			n.bytes += r.bytes
			if n.up() {
				live = append(live, n)
			}
		}
		lh := s.node(r.lease)
		if lh == nil || !lh.up() {
			continue // unavailable: nobody serves it
		}
		lh.leases++
		writes := r.qps - r.reads
		anyReads := r.reads * w.AnyReplicaReads
		lh.load += writes + r.reads - anyReads
		lh.requests += writes + r.reads - anyReads
		for _, n := range live {
			n.load += anyReads / float64(len(live))
			n.requests += anyReads / float64(len(live))
			if n != lh {
				n.load += s.opts.FollowerWriteCost * writes
			}
		}
	}
	for _, n := range s.nodes {
		if !n.up() {
			n.load, n.requests, n.cpu, n.score, n.util, n.served, n.rejected, n.p99 = 0, 0, 0, 0, 0, 0, 0, 0
			continue
		}
		s.foreground(n)
		u := n.util
		n.cpu = math.Min(u, 1)
		n.score = Score(n.cpu, n.io, u-1)
	}
}

// Score is the simulated node's load score, the shape of
// internal/monitor's with its default weights and no service time or
// round trip: 1/(1−cpu) + 0.5/(1−mem) + 1.5/(1−disk) + 1/(1−queue), with
// memory at 0, disk the snapshot traffic over the disk bandwidth and queue
// the load above capacity (load/capacity − 1). Utilisations are clamped to
// [0, 0.99]. An idle node scores 4.
func Score(cpu, disk, queue float64) float64 {
	return 1/(1-clamp(cpu)) + 0.5 + 1.5/(1-clamp(disk)) + 1/(1-clamp(queue))
}

func clamp(u float64) float64 {
	if !(u > 0) {
		return 0
	}
	return math.Min(u, 0.99)
}

// elect gives r's lease to a random live voter when a quorum of its voters
// is up, else leaves it without one.
func (s *Sim) elect(r *rangeState) {
	var live []uint64
	for _, v := range r.voters() {
		if s.up(v) {
			live = append(live, v)
		}
	}
	if !s.quorum(r) || len(live) == 0 {
		r.lease = 0
		return
	}
	r.lease = live[s.rng.IntN(len(live))]
}

// TransferLease moves a range's lease by hand (an operator's `ctl
// transfer-lease`, not counted as the policy's): the target must be an up
// voter of the range.
func (s *Sim) TransferLease(rangeID, to uint64) error {
	r := s.byID[rangeID]
	if r == nil {
		return fmt.Errorf("sim: no range %d", rangeID)
	}
	if rep, ok := r.has(to); !ok || rep.Type != placement.Voter || !s.up(to) {
		return fmt.Errorf("sim: node %d holds no up voter of range %d", to, rangeID)
	}
	r.lease = to
	s.logf("r%d lease moved to n%d by hand", rangeID, to)
	s.computeLoads()
	return nil
}

// handOff moves r's lease away from its leaseholder being removed: to the
// up voter with the lowest score (then lowest ID), as a leaseholder does
// before it leaves.
func (s *Sim) handOff(r *rangeState, leaving uint64) {
	var best *node
	for _, v := range r.voters() {
		n := s.node(v)
		if v == leaving || n == nil || !n.up() {
			continue
		}
		if best == nil || n.score < best.score || n.score == best.score && n.id < best.id {
			best = n
		}
	}
	if best == nil {
		r.lease = 0
		return
	}
	r.lease = best.id
}

// health counts ranges with fewer up voters than rf (under-replicated),
// more voters than rf, and without a leaseholder (unavailable).
func (s *Sim) health(rf int) (under, over, unavailable int) {
	for _, r := range s.ranges {
		vs := r.voters()
		up := 0
		for _, v := range vs {
			if s.up(v) {
				up++
			}
		}
		if up < rf {
			under++
		}
		if len(vs) > rf {
			over++
		}
		if r.lease == 0 || !s.up(r.lease) {
			unavailable++
		}
	}
	return under, over, unavailable
}
